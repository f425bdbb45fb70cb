import type { Metadata } from "next";
import { AuthCard } from "@/app/_components/auth-card";
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
    <AuthCard title="Sign in" description="Use the email and password of your Berth account.">
      <SignInForm nextPath={safeNextPath(next)} />
    </AuthCard>
  );
}
