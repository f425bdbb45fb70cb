import type { Metadata } from "next";
import { SignInForm } from "./sign-in-form";

export const metadata: Metadata = { title: "Sign in" };

// Only same-site paths: `?next=https://evil.example` must not turn sign-in into an open redirect.
function safeNextPath(value: string | string[] | undefined): string {
  return typeof value === "string" && value.startsWith("/") && !value.startsWith("//") ? value : "/";
}

export default async function SignInPage({
  searchParams,
}: {
  searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  const { next } = await searchParams;
  return (
    <main className="auth-page">
      <div className="auth-card">
        <div className="brand">Berth</div>
        <h1>Sign in</h1>
        <p className="lead">Use the email and password of your Berth account.</p>
        <SignInForm nextPath={safeNextPath(next)} />
      </div>
    </main>
  );
}
