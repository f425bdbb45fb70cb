"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { type FormEvent, useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";
import { useChangePassword } from "./change-password";

export function ProfileView() {
  const trpc = useTRPC();
  const me = useQuery(trpc.tenant.me.queryOptions());
  const password = useChangePassword();
  const [mismatch, setMismatch] = useState(false);

  async function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const formElement = event.currentTarget;
    const form = new FormData(formElement);
    const next = formString(form, "newPassword");
    if (next !== formString(form, "confirmPassword")) {
      setMismatch(true);
      return;
    }
    setMismatch(false);
    if (await password.change(formString(form, "currentPassword"), next)) {
      formElement.reset();
      toast.success("Password changed. Your other sessions were signed out.");
    }
  }

  if (me.error) return <Alert>{me.error.message}</Alert>;
  if (!me.data) return <Skeleton className="h-48 w-full" />;
  const principal = me.data.principal;
  if (principal.kind !== "user") return <Alert tone="info">API keys have no profile or password.</Alert>;

  return (
    <div className="grid gap-6 lg:grid-cols-2">
      <Card aria-labelledby="account-heading">
        <CardHeader>
          <div>
            <CardTitle id="account-heading">Account</CardTitle>
            <CardDescription>Who you are signed in as, and where.</CardDescription>
          </div>
        </CardHeader>
        <CardContent className="grid gap-4 text-sm">
          <div className="grid grid-cols-[6rem_1fr] gap-y-2">
            <span className="text-muted-foreground">Name</span>
            <span data-testid="profile-name">{principal.name}</span>
            <span className="text-muted-foreground">Email</span>
            <span data-testid="profile-email">{principal.email}</span>
          </div>
          <div>
            <p className="text-muted-foreground mb-2 text-xs font-medium">Tenants</p>
            <ul className="grid gap-1.5">
              {me.data.tenants.map((tenant) => (
                <li key={tenant.id} className="flex items-center justify-between rounded-md border px-3 py-2">
                  <Link
                    href={`/t/${encodeURIComponent(tenant.slug)}`}
                    className="font-medium hover:underline"
                  >
                    {tenant.name}
                  </Link>
                  <Badge>{tenant.role}</Badge>
                </li>
              ))}
            </ul>
          </div>
        </CardContent>
      </Card>

      <Card aria-labelledby="password-heading">
        <CardHeader>
          <div>
            <CardTitle id="password-heading">Password</CardTitle>
            <CardDescription>
              Changing it signs you out of every other browser and device; this one stays signed in.
            </CardDescription>
          </div>
        </CardHeader>
        <CardContent>
          <form
            className="grid gap-4"
            onSubmit={(event) => void onSubmit(event)}
            onChange={() => {
              if (password.error) password.clearError();
              if (mismatch) setMismatch(false);
            }}
            aria-label="Change password"
          >
            <Field label="Current password">
              <Input name="currentPassword" type="password" autoComplete="current-password" required />
            </Field>
            <Field label="New password" hint="At least 8 characters.">
              <Input
                name="newPassword"
                type="password"
                autoComplete="new-password"
                required
                minLength={8}
                maxLength={128}
              />
            </Field>
            <Field label="Confirm new password" error={mismatch ? "The passwords do not match." : null}>
              <Input
                name="confirmPassword"
                type="password"
                autoComplete="new-password"
                required
                minLength={8}
                maxLength={128}
              />
            </Field>
            {password.error && <Alert>{password.error}</Alert>}
            <div>
              <Button type="submit" disabled={password.pending}>
                {password.pending ? "Changing…" : "Change password"}
              </Button>
            </div>
          </form>
        </CardContent>
      </Card>
    </div>
  );
}
