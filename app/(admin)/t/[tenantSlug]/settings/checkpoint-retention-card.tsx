"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId } from "react";
import { toast } from "sonner";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { Label } from "@/app/_components/ui/label";
import { Select } from "@/app/_components/ui/select";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";
import type { TenantPolicyView } from "@/server/modules/tenant/tenant-policy";
import { ServerErrors } from "../agents/agent-ui";

const MIB = 1024 * 1024;
const UNITS = { MiB: MIB, GiB: 1024 * MIB } as const;
type Unit = keyof typeof UNITS;

/** A stored cap in the largest unit that shows it whole (GiB when it is a whole number of them). */
function capInUnits(bytes: number | null): { amount: string; unit: Unit } {
  if (bytes === null) return { amount: "", unit: "GiB" };
  if (bytes % UNITS.GiB === 0) return { amount: String(bytes / UNITS.GiB), unit: "GiB" };
  return { amount: String(Math.round((bytes / MIB) * 100) / 100), unit: "MiB" };
}

/** A whole number from the form, null when empty (the default); NaN is left for the server to refuse. */
function optionalNumber(form: FormData, name: string): number | null {
  const text = formString(form, name).trim();
  return text === "" ? null : Number(text);
}

type RetentionPatch = Partial<
  Pick<TenantPolicyView, "checkpointKeepTurns" | "checkpointKeepDays" | "checkpointStorageBytes">
>;

/** Only the fields that differ from the stored policy, so a save changes nothing else. */
function retentionPatch(policy: TenantPolicyView, form: FormData): RetentionPatch {
  const patch: RetentionPatch = {};
  const turns = optionalNumber(form, "keepTurns");
  if (turns !== policy.checkpointKeepTurns) patch.checkpointKeepTurns = turns;
  const days = optionalNumber(form, "keepDays");
  if (days !== policy.checkpointKeepDays) patch.checkpointKeepDays = days;
  const amount = optionalNumber(form, "storageCap");
  const unit = formString(form, "storageUnit") === "MiB" ? "MiB" : "GiB";
  const bytes = amount === null ? null : Math.round(amount * UNITS[unit]);
  if (bytes !== policy.checkpointStorageBytes) patch.checkpointStorageBytes = bytes;
  return patch;
}

/**
 * How long the tenant's turn checkpoints are kept (`tenant.setPolicy`, owners): the last K turns, T days,
 * and a cap on their stored (deduplicated) bytes. Empty fields are the installation's defaults, and no
 * cap. Everyone else reads them.
 */
export function CheckpointRetentionCard({
  tenantSlug,
  policy,
  canManage,
}: {
  tenantSlug: string;
  policy: TenantPolicyView;
  canManage: boolean;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const save = useMutation(
    trpc.tenant.setPolicy.mutationOptions({
      onSuccess: async (next) => {
        queryClient.setQueryData(trpc.tenant.policy.queryKey({ tenantSlug }), next);
        toast.success("Checkpoint retention saved.");
        await queryClient.invalidateQueries({ queryKey: trpc.tenant.policy.queryKey({ tenantSlug }) });
      },
    }),
  );
  const cap = capInUnits(policy.checkpointStorageBytes);
  const capId = useId();
  const submitOnce = useSubmitOnce();

  function onSave(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const patch = retentionPatch(policy, new FormData(event.currentTarget));
    if (Object.keys(patch).length === 0) return void toast.info("Nothing changed.");
    // A second submit while one is in flight (a double click) sends nothing; the policy takes no key.
    submitOnce(() => save.mutateAsync({ tenantSlug, ...patch }));
  }

  return (
    <Card aria-labelledby="checkpoints-heading" data-testid="settings-checkpoints">
      <CardHeader>
        <div>
          <CardTitle id="checkpoints-heading">Checkpoints</CardTitle>
          <CardDescription>
            Every chat turn records its workspace&apos;s files, to diff, revert or fork from. Older
            checkpoints are dropped past these limits; each workspace keeps at least its newest.
            {canManage ? "" : " Only owners change these."}
          </CardDescription>
        </div>
      </CardHeader>
      <CardContent>
        {/* Remounted after a save so the fields start from the stored values again. */}
        <form
          key={JSON.stringify([
            policy.checkpointKeepTurns,
            policy.checkpointKeepDays,
            policy.checkpointStorageBytes,
          ])}
          className="grid gap-4"
          onSubmit={onSave}
          onChange={resetErrorOnEdit(save)}
          aria-label="Checkpoint retention"
        >
          <fieldset disabled={!canManage} className="contents">
            <Field label="Keep the last turns" hint="Per workspace, 1 to 10,000. Empty: the default.">
              <Input
                name="keepTurns"
                type="number"
                min={1}
                max={10_000}
                step={1}
                placeholder="default"
                defaultValue={policy.checkpointKeepTurns ?? ""}
              />
            </Field>
            <Field label="Keep for days" hint="1 to 3,650. Empty: the default.">
              <Input
                name="keepDays"
                type="number"
                min={1}
                max={3_650}
                step={1}
                placeholder="default"
                defaultValue={policy.checkpointKeepDays ?? ""}
              />
            </Field>
            {/* Two controls (amount and unit) under one label: Field labels a single control. */}
            <div className="grid gap-2" data-slot="field">
              <Label htmlFor={capId}>Storage cap</Label>
              <div className="flex gap-2">
                <Input
                  id={capId}
                  name="storageCap"
                  type="number"
                  min={0}
                  step="any"
                  placeholder="no cap"
                  defaultValue={cap.amount}
                  className="min-w-0 flex-1"
                  aria-describedby={`${capId}-hint`}
                />
                <Select
                  name="storageUnit"
                  defaultValue={cap.unit}
                  aria-label="Storage cap unit"
                  className="w-24"
                >
                  <option value="MiB">MiB</option>
                  <option value="GiB">GiB</option>
                </Select>
              </div>
              <p id={`${capId}-hint`} className="text-muted-foreground text-xs">
                The tenant&apos;s checkpoint storage, each distinct file content counted once. At least 1 MiB.
                Empty: no cap.
              </p>
            </div>
            {canManage && (
              <div>
                <Button type="submit" disabled={save.isPending}>
                  {save.isPending ? "Saving…" : "Save retention"}
                </Button>
              </div>
            )}
          </fieldset>
        </form>
        <ServerErrors error={save.error} />
      </CardContent>
    </Card>
  );
}
