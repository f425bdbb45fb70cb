"use client";

import { type FormEvent, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Field } from "@/app/_components/ui/field";
import { Input } from "@/app/_components/ui/input";

type SignInErrorBody = { code?: string; message?: string };

function describeSignInFailure(status: number, body: SignInErrorBody | null): string {
  if (status === 401 || body?.code === "INVALID_EMAIL_OR_PASSWORD") return "Invalid email or password.";
  if (status === 429) return "Too many attempts. Wait a minute and try again.";
  return body?.message ?? `Sign-in failed (HTTP ${status}). Try again.`;
}

/** Posts to better-auth's email sign-in endpoint; the session cookie comes back on the response. */
export function SignInForm({ nextPath }: { nextPath: string }) {
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  async function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setPending(true);
    setError(null);
    try {
      const response = await fetch("/api/auth/sign-in/email", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: form.get("email"), password: form.get("password") }),
      });
      if (!response.ok) {
        const body = (await response.json().catch(() => null)) as SignInErrorBody | null;
        setError(describeSignInFailure(response.status, body));
        return;
      }
      // A full navigation, so server components render with the new cookie.
      window.location.assign(nextPath);
    } catch {
      setError("Could not reach Berth. Check your connection and try again.");
    } finally {
      setPending(false);
    }
  }

  return (
    <form className="grid gap-4" onSubmit={(event) => void onSubmit(event)} aria-label="Sign in">
      {error && <Alert>{error}</Alert>}
      <Field label="Email">
        <Input name="email" type="email" autoComplete="username" required autoFocus />
      </Field>
      <Field label="Password">
        <Input name="password" type="password" autoComplete="current-password" required />
      </Field>
      <Button type="submit" disabled={pending} className="mt-2 w-full">
        {pending ? "Signing in…" : "Sign in"}
      </Button>
    </form>
  );
}
