import type { Metadata } from "next";
import { safeNextPath } from "@/server/shared/safe-redirect";
import { SignInForm } from "./sign-in-form";

export const metadata: Metadata = { title: "Sign in" };

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
        {/* Only same-origin paths: `?next=/\evil.example` must not turn sign-in into an open redirect. */}
        <SignInForm nextPath={safeNextPath(next)} />
      </div>
    </main>
  );
}
