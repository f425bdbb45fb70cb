"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { CopyButton } from "@/app/_components/ui/copy-button";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { Select } from "@/app/_components/ui/select";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import { Textarea } from "@/app/_components/ui/textarea";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";
import { ServerErrors } from "../agents/agent-ui";

type Rule = { host: string; ports?: number[] };
const MODES = ["off", "allowlist", "open"] as const;
const MODE_LABELS: Record<(typeof MODES)[number], string> = {
  off: "Off: no network (default)",
  allowlist: "Allow-list: only the hosts below",
  open: "Open: any public host",
};

/** One rule per line: `host [port …]` (the server checks hosts, CIDRs and ports and says which line failed). */
function parseRules(text: string): Rule[] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const [host = "", ...ports] = line.split(/\s+/);
      return ports.length ? { host, ports: ports.map(Number) } : { host };
    });
}

const rulesText = (rules: readonly Rule[]) =>
  rules.map((rule) => [rule.host, ...(rule.ports ?? [])].join(" ")).join("\n");

/**
 * Where the tenant's workspaces may connect (`egress.setTenantPolicy`, owners): off, an allow-list, or any
 * public host, through Berth's egress proxy. An agent's own policy replaces this one.
 */
export function EgressCard({ tenantSlug, canManage }: { tenantSlug: string; canManage: boolean }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const policy = useQuery(trpc.egress.tenantPolicy.queryOptions({ tenantSlug }));
  const save = useMutation(
    trpc.egress.setTenantPolicy.mutationOptions({
      onSuccess: (next) => {
        queryClient.setQueryData(trpc.egress.tenantPolicy.queryKey({ tenantSlug }), next);
        toast.success("Egress policy saved.");
      },
    }),
  );
  const submitOnce = useSubmitOnce();

  function onSave(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const mode = MODES.find((candidate) => candidate === form.get("mode")) ?? "off";
    const allow = parseRules(formString(form, "allow"));
    // A double click sends one save; setting the same policy twice is harmless anyway.
    submitOnce(() => save.mutateAsync({ tenantSlug, policy: { mode, allow } }));
  }

  if (policy.error) return <Alert>{policy.error.message}</Alert>;
  if (!policy.data) return <Skeleton className="h-48 w-full" />;
  const stored = policy.data.stored ?? policy.data.effective;
  return (
    <Card aria-labelledby="egress-heading" data-testid="settings-egress">
      <CardHeader>
        <div>
          <CardTitle id="egress-heading">Egress</CardTitle>
          <CardDescription>
            Where agents&apos; commands may connect, through Berth&apos;s proxy (HTTP and HTTPS tunnels).
            Private, loopback and link-local addresses are refused unless a line names the address or subnet.
            {canManage ? "" : " Only owners change this."}
          </CardDescription>
        </div>
      </CardHeader>
      <CardContent>
        <form
          key={JSON.stringify(stored)}
          className="grid gap-4"
          onSubmit={onSave}
          onChange={resetErrorOnEdit(save)}
          aria-label="Egress policy"
        >
          <fieldset disabled={!canManage} className="contents">
            <Field label="Policy">
              <Select name="mode" defaultValue={stored.mode}>
                {MODES.map((mode) => (
                  <option key={mode} value={mode}>
                    {MODE_LABELS[mode]}
                  </option>
                ))}
              </Select>
            </Field>
            <Field
              label="Allow-list"
              hint="One per line: a host, *.example.com, an IP or CIDR, then optional ports."
            >
              <Textarea
                name="allow"
                rows={4}
                placeholder={"api.github.com 443\n*.pypi.org\n10.0.0.0/8 5432"}
                defaultValue={rulesText(stored.allow)}
              />
            </Field>
            {canManage && (
              <div>
                <Button type="submit" disabled={save.isPending}>
                  {save.isPending ? "Saving…" : "Save egress"}
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

/**
 * The tenant's secrets (`egress.*TenantSecret`, owners): a value goes in once and never comes back (the
 * list shows its last 4 characters); commands use the placeholder, which the proxy replaces toward the
 * secret's hosts only.
 */
export function SecretsCard({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const listKey = trpc.egress.tenantSecrets.queryKey({ tenantSlug });
  const secrets = useQuery(trpc.egress.tenantSecrets.queryOptions({ tenantSlug }));
  const refresh = () => queryClient.invalidateQueries({ queryKey: listKey });
  const create = useMutation(
    trpc.egress.createTenantSecret.mutationOptions({
      onSuccess: async (created) => {
        toast.success(`Secret saved. Use ${created.placeholder} in an env value or header.`);
        await refresh();
      },
    }),
  );
  const remove = useMutation(trpc.egress.deleteTenantSecret.mutationOptions({ onSuccess: refresh }));
  const submitOnce = useSubmitOnce();

  function onCreate(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const formElement = event.currentTarget;
    const form = new FormData(formElement);
    const hosts = formString(form, "hosts")
      .split(/[\s,]+/)
      .filter(Boolean);
    // A double click creates once: the second submit is dropped while the first is in flight (and the
    // name is unique, so a replay would be refused rather than duplicated).
    submitOnce(async () => {
      await create.mutateAsync({
        tenantSlug,
        name: formString(form, "name").trim(),
        value: formString(form, "value"),
        hosts,
      });
      formElement.reset();
    });
  }

  return (
    <Card aria-labelledby="secrets-heading" data-testid="settings-secrets">
      <CardHeader>
        <div>
          <CardTitle id="secrets-heading">Secrets</CardTitle>
          <CardDescription>
            Values agents use but never see. Put the placeholder (berth-secret://name) in an agent&apos;s env;
            the egress proxy puts the value into plain-HTTP request headers sent to the secret&apos;s hosts
            only.
          </CardDescription>
        </div>
      </CardHeader>
      <CardContent className="grid gap-4">
        {secrets.error && <Alert>{secrets.error.message}</Alert>}
        {!secrets.data ? (
          <Skeleton className="h-16 w-full" />
        ) : secrets.data.length === 0 ? (
          <p className="text-muted-foreground text-sm">No secrets yet.</p>
        ) : (
          <Table>
            <TableHeader>
              <TableRow>
                <TableHead>Placeholder</TableHead>
                <TableHead>Value</TableHead>
                <TableHead>Hosts</TableHead>
                <TableHead />
              </TableRow>
            </TableHeader>
            <TableBody>
              {secrets.data.map((secret) => (
                <TableRow key={secret.id}>
                  <TableCell className="font-mono text-xs">
                    {secret.placeholder} <CopyButton value={secret.placeholder} label="Copy placeholder" />
                  </TableCell>
                  <TableCell className="font-mono text-xs">…{secret.hint}</TableCell>
                  <TableCell className="text-xs">{secret.hosts.join(", ")}</TableCell>
                  <TableCell>
                    <Button
                      variant="ghost"
                      size="sm"
                      disabled={remove.isPending}
                      onClick={() => remove.mutate({ tenantSlug, secretId: secret.id })}
                    >
                      Delete
                    </Button>
                  </TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        )}
        <form
          className="grid gap-4"
          onSubmit={onCreate}
          onChange={resetErrorOnEdit(create)}
          aria-label="New secret"
        >
          <Field label="Name" hint="Lower-case letters, digits, - and _.">
            <Input name="name" required pattern="[a-z0-9][a-z0-9_\-]{0,62}" autoComplete="off" />
          </Field>
          <Field label="Value" hint="Shown only now; stored sealed.">
            <Input name="value" type="password" required autoComplete="off" />
          </Field>
          <Field label="Hosts" hint="Where the value may be sent: host names, *.example.com or IP addresses.">
            <Input name="hosts" required placeholder="api.github.com" />
          </Field>
          <div>
            <Button type="submit" disabled={create.isPending}>
              {create.isPending ? "Saving…" : "Add secret"}
            </Button>
          </div>
        </form>
        <ServerErrors error={create.error ?? remove.error} />
      </CardContent>
    </Card>
  );
}
