"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { useTRPC } from "@/app/_trpc/client";
import type { BackendSettingsForm } from "@/server/modules/backend-settings/backend-settings.types";
import { ServerErrors } from "../agents/agent-ui";
import { resetErrorOnEdit } from "@/app/_components/ui/use-submit-once";

/** A field from the form: empty → null (the installation's); numbers as numbers. */
function fieldValue(
  text: string,
  type: BackendSettingsForm["fields"][number]["type"],
): string | number | null {
  const trimmed = text.trim();
  if (trimmed === "") return null;
  return type === "string" ? trimmed : Number(trimmed);
}

/**
 * A card per backend of this installation whose driver declares tenant settings (admins; today E2B: the
 * tenant's own team). The fields come from the driver's declaration (`backendSettings.forms`), so a new
 * driver's settings need no change here.
 */
export function BackendSettingsCards({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const forms = useQuery(trpc.backendSettings.forms.queryOptions({ tenantSlug }));
  if (forms.error) return <Alert>{forms.error.message}</Alert>;
  if (!forms.data) return null;
  return (
    <>
      {forms.data.map((form) => (
        <BackendSettingsCard key={form.backend} tenantSlug={tenantSlug} form={form} />
      ))}
    </>
  );
}

/**
 * One backend's settings: its secret field stored sealed and shown only as a hint (an empty field keeps
 * the stored one), the other fields as stored. Empty fields are the installation's.
 */
function BackendSettingsCard({ tenantSlug, form }: { tenantSlug: string; form: BackendSettingsForm }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const onSuccess = () => {
    void queryClient.invalidateQueries(trpc.backendSettings.forms.queryFilter({ tenantSlug }));
    toast.success(`${form.title} settings saved.`);
  };
  const save = useMutation(trpc.backendSettings.set.mutationOptions({ onSuccess }));
  const clear = useMutation(trpc.backendSettings.clear.mutationOptions({ onSuccess }));
  const current = form.current;
  const headingId = `backend-settings-${form.backend}-heading`;

  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const data = new FormData(event.currentTarget);
    const settings: Record<string, string | number | null> = {};
    for (const field of form.fields) {
      const value = fieldValue(formString(data, field.name), field.type);
      // An empty secret field keeps the stored secret (it is never shown, so empty means "unchanged").
      if (field.secret && value === null) continue;
      settings[field.name] = value;
    }
    save.mutate({ tenantSlug, backend: form.backend, settings });
  }

  return (
    <Card aria-labelledby={headingId} data-testid={`settings-backend-${form.backend}`}>
      <CardHeader>
        <div>
          <CardTitle id={headingId}>{form.title}</CardTitle>
          <CardDescription>{form.description}</CardDescription>
        </div>
      </CardHeader>
      <CardContent className="grid gap-3 text-sm">
        <form
          className="grid gap-3"
          onSubmit={submit}
          onChange={resetErrorOnEdit(save, clear)}
          key={current.updatedAt?.toString() ?? "none"}
        >
          {form.fields.map((field) =>
            field.secret ? (
              <Field
                key={field.name}
                label={field.title}
                hint={
                  current.secretHint
                    ? `Stored: ${current.secretHint}. Leave empty to keep it.`
                    : "The installation's applies."
                }
              >
                <Input name={field.name} type="password" autoComplete="off" />
              </Field>
            ) : (
              <Field key={field.name} label={field.title}>
                <Input
                  name={field.name}
                  type={field.type === "string" ? "text" : "number"}
                  {...(field.minimum !== null ? { min: field.minimum } : {})}
                  {...(field.maximum !== null ? { max: field.maximum } : {})}
                  defaultValue={current.values[field.name] ?? ""}
                  placeholder="installation's"
                />
              </Field>
            ),
          )}
          <div className="flex flex-wrap gap-2">
            <Button type="submit" disabled={save.isPending}>
              Save
            </Button>
            {current.configured && (
              <Button
                variant="outline"
                disabled={clear.isPending}
                onClick={() => clear.mutate({ tenantSlug, backend: form.backend, confirm: true })}
              >
                Use the installation&apos;s settings
              </Button>
            )}
          </div>
          <ServerErrors error={save.error ?? clear.error} />
        </form>
      </CardContent>
    </Card>
  );
}
