import type { Metadata } from "next";
import { AuthCard } from "@/app/_components/auth-card";
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
    <AuthCard title="Sign in" description="Use the email and password of your Berth account.">
      {/* Only same-origin paths: `?next=/\evil.example` must not turn sign-in into an open redirect. */}
      <SignInForm nextPath={safeNextPath(next)} />
    </AuthCard>
  );
}
