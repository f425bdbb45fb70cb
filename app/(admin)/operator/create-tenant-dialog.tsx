"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { Plus } from "lucide-react";
import { type FormEvent, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { DoneFooter, FormDialog, SubmitFooter } from "@/app/_components/ui/form-dialog";
import { Input } from "@/app/_components/ui/input";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";
import { InviteLinkBox } from "./_components/invite-link";

/** "New tenant": name and slug; the first owner joins through the invitation link shown once. */
export function CreateTenantDialog() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [open, setOpen] = useState(false);
  const create = useMutation(
    trpc.operator.tenants.create.mutationOptions({
      onSuccess: () => queryClient.invalidateQueries({ queryKey: trpc.operator.tenants.list.queryKey() }),
    }),
  );
  const fieldErrors = create.error?.data?.fieldErrors ?? null;
  const submitOnce = useSubmitOnce();

  function close() {
    setOpen(false);
    create.reset();
  }

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    submitOnce((idempotencyKey) =>
      create.mutateAsync({
        idempotencyKey,
        name: formString(form, "name"),
        slug: formString(form, "slug"),
        ownerNote: formString(form, "ownerNote"),
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
          <Plus /> New tenant
        </Button>
      }
      title="New tenant"
      description="The tenant starts empty. Its first owner joins through a single-use invitation link: send it yourself (no email is sent)."
    >
      {create.data ? (
        <div className="grid gap-3">
          <p className="text-sm">
            Created <strong>{create.data.tenant.name}</strong> (<code>{create.data.tenant.slug}</code>).
          </p>
          <InviteLinkBox path={create.data.ownerInvite.path} />
          <DoneFooter onDone={close} />
        </div>
      ) : (
        <form
          className="grid gap-4"
          onSubmit={onSubmit}
          onChange={resetErrorOnEdit(create)}
          aria-label="Create tenant"
        >
          <Field label="Name" error={fieldErrors?.name?.[0]}>
            <Input name="name" required maxLength={100} placeholder="Acme Inc." />
          </Field>
          <Field
            label="Slug"
            hint="In its URLs: /t/<slug>. Lowercase letters, digits, dashes."
            error={fieldErrors?.slug?.[0]}
          >
            <Input name="slug" required maxLength={48} placeholder="acme" />
          </Field>
          <Field label="Owner" hint="Who the owner invitation is for (a reminder).">
            <Input name="ownerNote" maxLength={200} placeholder="Grace Hopper" />
          </Field>
          {create.error && !fieldErrors && <Alert>{create.error.message}</Alert>}
          <SubmitFooter pending={create.isPending} label="Create tenant" pendingLabel="Creating…" />
        </form>
      )}
    </FormDialog>
  );
}
