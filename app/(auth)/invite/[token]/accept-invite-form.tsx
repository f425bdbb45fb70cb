"use client";

import { type FormEvent, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";

type ErrorBody = { error?: { message?: string } };

/** Creates the account through the public accept route, then signs in with it and opens the tenant. */
export function AcceptInviteForm({ token }: { token: string }) {
  const [error, setError] = useState<string | null>(null);
  const [mismatch, setMismatch] = useState(false);
  const [pending, setPending] = useState(false);

  async function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const password = formString(form, "password");
    if (password !== formString(form, "confirm")) {
      setMismatch(true);
      return;
    }
    setMismatch(false);
    setPending(true);
    setError(null);
    try {
      const accepted = await fetch("/api/invitations/accept", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ token, name: form.get("name"), email: form.get("email"), password }),
      });
      const body = (await accepted.json().catch(() => null)) as
        (ErrorBody & { tenantSlug?: string; email?: string }) | null;
      if (!accepted.ok || !body?.tenantSlug || !body.email) {
        setError(body?.error?.message ?? `Could not accept the invitation (HTTP ${accepted.status}).`);
        return;
      }
      const signIn = await fetch("/api/auth/sign-in/email", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: body.email, password }),
      });
      // The account exists either way; a failed automatic sign-in just sends the person to the form.
      window.location.assign(signIn.ok ? `/t/${encodeURIComponent(body.tenantSlug)}` : "/sign-in");
    } catch {
      setError("Could not reach Berth. Check your connection and try again.");
    } finally {
      setPending(false);
    }
  }

  return (
    <form className="grid gap-4" onSubmit={(event) => void onSubmit(event)} aria-label="Accept invitation">
      {error && <Alert>{error}</Alert>}
      <Field label="Name">
        <Input name="name" autoComplete="name" required maxLength={100} autoFocus />
      </Field>
      <Field label="Email">
        <Input name="email" type="email" autoComplete="username" required maxLength={254} />
      </Field>
      <Field label="Password" hint="At least 8 characters.">
        <Input
          name="password"
          type="password"
          autoComplete="new-password"
          required
          minLength={8}
          maxLength={128}
        />
      </Field>
      <Field label="Confirm password" error={mismatch ? "The passwords do not match." : null}>
        <Input
          name="confirm"
          type="password"
          autoComplete="new-password"
          required
          minLength={8}
          maxLength={128}
        />
      </Field>
      <Button type="submit" disabled={pending} className="mt-2 w-full">
        {pending ? "Joining…" : "Join"}
      </Button>
    </form>
  );
}
