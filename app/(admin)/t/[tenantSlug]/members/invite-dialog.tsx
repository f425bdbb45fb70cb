"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { UserPlus } from "lucide-react";
import { type FormEvent, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { DoneFooter, FormDialog, SubmitFooter } from "@/app/_components/ui/form-dialog";
import { Input } from "@/app/_components/ui/input";
import { OneTimeLink } from "@/app/_components/ui/one-time-link";
import { Select } from "@/app/_components/ui/select";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";
import { canGrantRole } from "@/server/auth/policy";
import type { TenantRole } from "@/server/auth/roles";

const INVITABLE: { role: Exclude<TenantRole, "owner">; help: string }[] = [
  { role: "viewer", help: "reads everything, changes nothing" },
  { role: "member", help: "chats with agents, uses sessions and workspaces" },
  { role: "admin", help: "also manages agents, keys, members and workspaces" },
];
const EXPIRY = [
  { hours: 24, label: "1 day" },
  { hours: 24 * 7, label: "7 days" },
  { hours: 24 * 30, label: "30 days" },
];

/** "Invite people": a single-use link for a role, shown once, to send however you like. */
export function InviteDialog({ tenantSlug, myRole }: { tenantSlug: string; myRole: TenantRole }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [open, setOpen] = useState(false);
  const [link, setLink] = useState<string | null>(null);
  const submitOnce = useSubmitOnce();
  const create = useMutation(
    trpc.invite.create.mutationOptions({
      onSuccess: async ({ token }) => {
        setLink(`${window.location.origin}/invite/${token}`);
        await queryClient.invalidateQueries({ queryKey: trpc.invite.list.queryKey({ tenantSlug }) });
      },
    }),
  );

  // Closing forgets the link: it is shown once.
  function close() {
    setOpen(false);
    setLink(null);
    create.reset();
  }

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const role = INVITABLE.find((option) => option.role === form.get("role"))?.role ?? "viewer";
    submitOnce((idempotencyKey) =>
      create.mutateAsync({
        tenantSlug,
        role,
        note: formString(form, "note"),
        expiresInHours: Number(form.get("expires")),
        idempotencyKey,
      }),
    );
  }

  return (
    <FormDialog
      open={open}
      onOpen={() => setOpen(true)}
      onClose={close}
      trigger={
        <Button size="sm">
          <UserPlus /> Invite people
        </Button>
      }
      title="Invite someone"
      description="A single-use link: whoever opens it sets a name and password and joins with the role you choose. No email is sent; share the link yourself."
    >
      {link ? (
        <div className="grid gap-3">
          <OneTimeLink
            notice="Invitation created. Copy the link now: it is shown only once."
            link={link}
            testId="invite-link"
          />
          <DoneFooter onDone={close} />
        </div>
      ) : (
        <form
          className="grid gap-4"
          onSubmit={onSubmit}
          onChange={resetErrorOnEdit(create)}
          aria-label="Create invitation"
        >
          <Field label="Role">
            <Select name="role" defaultValue="member">
              {INVITABLE.filter((option) => canGrantRole(myRole, option.role)).map((option) => (
                <option key={option.role} value={option.role}>
                  {option.role} — {option.help}
                </option>
              ))}
            </Select>
          </Field>
          <Field label="Note" hint="Who it is for, shown in the pending list.">
            <Input name="note" maxLength={200} placeholder="Grace, platform team" />
          </Field>
          <Field label="Expires after">
            <Select name="expires" defaultValue={String(24 * 7)}>
              {EXPIRY.map((option) => (
                <option key={option.hours} value={option.hours}>
                  {option.label}
                </option>
              ))}
            </Select>
          </Field>
          {create.error && <Alert>{create.error.message}</Alert>}
          <SubmitFooter pending={create.isPending} label="Create invitation link" pendingLabel="Creating…" />
        </form>
      )}
    </FormDialog>
  );
}
