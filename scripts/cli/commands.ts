import { z } from "zod";
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import {
  grantOperator,
  listOperatorsFor,
  readOperatorAudit,
  revokeOperator,
} from "@/server/modules/operator/operator.service";
import { findTenantDeletionReceipt } from "@/server/modules/operator/tenant-deletion.data";
import {
  createOwnerInvite,
  createTenant,
  listTenantsForOperator,
  readTenantForOperator,
  requestTenantDeletion,
  resumeTenant,
  suspendTenant,
} from "@/server/modules/operator/tenant-lifecycle.service";
import { inviteLinkSecret } from "@/server/modules/member/invite.service";
import { setTenantQuotaOverrides } from "@/server/modules/operator/tenant-quota.service";
import { AppError } from "@/server/shared/errors";
import type { Berth } from "@/server/composition/berth";
import type { Db } from "@/server/db";

/**
 * `npm run berth -- <group> <command> [args] [--flags]`: each command is a zod schema over its positional
 * arguments and flags, and one call of the same operator services the API uses (as the CLI actor: it runs on
 * the installation, with its database credentials). Output is text for people, or JSON with `--json`.
 */

export type CliContext = {
  /** The CLI process' Berth root (built from the environment `npm run berth` resolved). */
  berth: Berth;
  baseUrl: string;
  print: (line: string) => void;
};
type Command = {
  usage: string;
  /** Over `{ positionals, flags }` (scripts/cli/argv.ts); unknown flags are refused. */
  schema: z.ZodType;
  run: (args: never, ctx: CliContext) => Promise<{ json: unknown; text: string[] }>;
};

const operator = cliOperatorActor();
const tenantArg = z.string({ error: "the tenant (slug or id) is required" }).min(1);
const flagNumber = z.string().regex(/^\d+$/, "must be a whole number").transform(Number).optional();
const flagString = z.string().optional();
/** A quota flag's value: a number, or `default` (null: the installation's value). */
const flagLimit = z
  .string()
  .regex(/^(\d+(\.\d+)?|default)$/, "must be a number or default")
  .transform((value) => (value === "default" ? null : Number(value)))
  .optional();
/** `tenant quota` flags → the override they set. */
const QUOTA_FLAGS = {
  "live-workspaces": "liveWorkspaces",
  "total-workspaces": "totalWorkspaces",
  "concurrent-turns": "concurrentTurns",
  "provisions-per-minute": "provisionsPerMinute",
  "warm-claims-per-minute": "warmClaimsPerMinute",
  "workspace-cpus": "workspaceCpus",
  "workspace-memory-bytes": "workspaceMemoryBytes",
  "workspace-disk-bytes": "workspaceDiskBytes",
  "mcp-servers-per-scope": "mcpServersPerScope",
  "skill-storage-bytes": "skillStorageBytes",
} as const;

/** A command's arguments: the positional words after the command and its flags (no others). */
function args<P extends z.ZodTuple, F extends z.core.$ZodShape>(tuple: P, flags: F = {} as F) {
  const arity = tuple.def.items.length;
  const positionals = z
    .array(z.string())
    .refine((words) => words.length >= arity, "an argument is missing")
    .refine((words) => words.length <= arity, "too many arguments")
    .pipe(tuple as unknown as z.ZodType<z.output<P>, string[]>);
  return z.object({ positionals, flags: z.strictObject(flags) });
}

function command<S extends z.ZodType>(
  usage: string,
  schema: S,
  run: (args: z.output<S>, ctx: CliContext) => Promise<{ json: unknown; text: string[] }>,
): Command {
  return { usage, schema, run: run };
}

const oneTenant = <F extends z.core.$ZodShape>(flags: F = {} as F) => args(z.tuple([tenantArg]), flags);

const tenantLine = (t: {
  slug: string;
  name: string;
  status: string;
  usage: {
    members: number;
    agents: number;
    workspacesLive: number;
    workspacesTotal: number;
    sessions: number;
  };
}) =>
  `${t.slug.padEnd(24)} ${t.status.padEnd(10)} members ${t.usage.members}  agents ${t.usage.agents}  ` +
  `workspaces ${t.usage.workspacesLive}/${t.usage.workspacesTotal} live  sessions ${t.usage.sessions}  ${t.name}`;

export const COMMANDS: Record<string, Command> = {
  "tenant create": command(
    "tenant create --name <name> --slug <slug> [--owner-note <text>] [--expires-in-hours <1..720>]",
    args(z.tuple([]), {
      name: z.string({ error: "--name <name> is required" }),
      slug: z.string({ error: "--slug <slug> is required" }),
      "owner-note": flagString,
      "expires-in-hours": flagNumber,
    }),
    async ({ flags }, ctx) => {
      const created = await createTenant(
        operator,
        {
          name: flags.name,
          slug: flags.slug,
          ownerNote: flags["owner-note"],
          expiresInHours: flags["expires-in-hours"],
        },
        inviteLinkSecret(ctx.berth.config),
        ctx.berth.db,
      );
      const link = `${ctx.baseUrl}${created.ownerInvite.path}`;
      return {
        json: { tenant: created.tenant, ownerInvite: { ...created.ownerInvite, url: link } },
        text: [
          `created tenant ${created.tenant.slug} (${created.tenant.id})`,
          `owner invitation (shown once, valid until ${created.ownerInvite.expiresAt.toISOString()}):`,
          `  ${link}`,
        ],
      };
    },
  ),
  "tenant list": command("tenant list", args(z.tuple([])), async (_args, ctx) => {
    const tenants = await listTenantsForOperator(operator, ctx.berth.db);
    return { json: tenants, text: tenants.length ? tenants.map(tenantLine) : ["no tenants"] };
  }),
  "tenant show": command("tenant show <slug|id>", oneTenant(), async ({ positionals: [ref] }, ctx) => {
    const tenant = await readTenantForOperator(operator, { tenantId: ref }, ctx.berth.db);
    return {
      json: tenant,
      text: [
        tenantLine(tenant),
        `owners: ${tenant.owners.map((o) => o.email).join(", ") || "none yet"}`,
        ...tenant.ownerInvites.map(
          (i) => `owner invitation ${i.id}: ${i.state} (until ${i.expiresAt.toISOString()})`,
        ),
      ],
    };
  }),
  "tenant invite-owner": command(
    "tenant invite-owner <slug|id> [--note <text>]",
    oneTenant({ note: flagString }),
    async ({ positionals: [ref], flags }, ctx) => {
      const invite = await createOwnerInvite(
        operator,
        { tenantId: ref, note: flags.note },
        inviteLinkSecret(ctx.berth.config),
        ctx.berth.db,
      );
      const url = `${ctx.baseUrl}${invite.path}`;
      return { json: { ...invite, url }, text: ["owner invitation (shown once):", `  ${url}`] };
    },
  ),
  "tenant quota": command(
    "tenant quota <slug|id> [--<limit> <n|default> ...] (limits: " +
      Object.keys(QUOTA_FLAGS).join(", ") +
      ")",
    oneTenant(Object.fromEntries(Object.keys(QUOTA_FLAGS).map((flag) => [flag, flagLimit]))),
    async ({ positionals: [ref], flags }, ctx) => {
      // Only the limits named change; `default` gives one back to the installation's value.
      const overrides = Object.fromEntries(
        Object.entries(flags).map(([flag, value]) => [QUOTA_FLAGS[flag as keyof typeof QUOTA_FLAGS], value]),
      );
      const usage = await setTenantQuotaOverrides(
        operator,
        { tenantId: ref, overrides },
        ctx.berth.quota,
        ctx.berth.db,
      );
      return {
        json: usage,
        text: usage.limits.map(
          (l) =>
            `${l.label.padEnd(24)} ${String(l.value).padStart(12)}${l.overridden ? " (override)" : ""}` +
            (l.used === null ? "" : `  used ${l.used}`),
        ),
      };
    },
  ),
  "tenant suspend": command(
    "tenant suspend <slug|id> [--reason <text>]",
    oneTenant({ reason: flagString }),
    async ({ positionals: [ref], flags }, ctx) => {
      const result = await suspendTenant(
        operator,
        { tenantId: ref, reason: flags.reason },
        ctx.berth.queues,
        ctx.berth.db,
      );
      return {
        json: result,
        text: [`suspended ${result.tenant.slug}; stopping ${result.stopsRequested.length} workspace(s)`],
      };
    },
  ),
  "tenant resume": command("tenant resume <slug|id>", oneTenant(), async ({ positionals: [ref] }, ctx) => {
    const result = await resumeTenant(operator, { tenantId: ref }, ctx.berth.db);
    return { json: result, text: [`resumed ${result.tenant.slug}`] };
  }),
  "tenant delete": command(
    "tenant delete <slug|id> --yes [--wait <seconds>]",
    oneTenant().extend({
      flags: z.strictObject({
        yes: z.literal(true, { error: "deleting a tenant purges all its data: confirm with --yes" }),
        wait: flagNumber,
      }),
    }),
    async ({ positionals: [ref], flags }, ctx) => {
      const requested = await requestTenantDeletion(
        operator,
        { tenantId: ref },
        ctx.berth.queues,
        ctx.berth.db,
      );
      if (!flags.wait) {
        return {
          json: requested,
          text: [
            `deletion of ${ref} queued (job ${requested.jobId}); the workers purge it and write a receipt`,
          ],
        };
      }
      const receipt = await waitForReceipt(requested.tenantId, flags.wait * 1000, ctx.berth.db);
      return { json: { ...requested, receipt }, text: [`deleted ${ref}; receipt ${receipt.id}`] };
    },
  ),
  "operator grant": command(
    "operator grant <email>",
    args(z.tuple([z.string()])),
    async ({ positionals: [email] }, ctx) => {
      const result = await grantOperator(operator, { email }, ctx.berth.db);
      return {
        json: result,
        text: [result.granted ? `${email} is now an operator` : `${email} already was one`],
      };
    },
  ),
  "operator revoke": command(
    "operator revoke <email>",
    args(z.tuple([z.string()])),
    async ({ positionals: [email] }, ctx) => {
      const result = await revokeOperator(operator, { email }, ctx.berth.db);
      return { json: result, text: [`${email} is no longer an operator`] };
    },
  ),
  "operator list": command("operator list", args(z.tuple([])), async (_args, ctx) => {
    const operators = await listOperatorsFor(operator, ctx.berth.db);
    return {
      json: operators,
      text: operators.map((o) => `${o.email ?? o.userId}  (granted by ${o.grantedBy})`),
    };
  }),
  "operator audit": command(
    "operator audit [--limit <n>]",
    args(z.tuple([]), { limit: flagNumber }),
    async ({ flags }, ctx) => {
      const rows = await readOperatorAudit(operator, { limit: flags.limit }, ctx.berth.db);
      return {
        json: rows,
        text: rows.map(
          (r) =>
            `${r.at.toISOString()}  ${r.action.padEnd(18)} ${r.outcome.padEnd(8)} ${r.targetLabel ?? r.targetId}  by ${r.actorEmail ?? r.actorId ?? r.actorType}`,
        ),
      };
    },
  ),
};

/** Polls (bounded) for the deletion receipt the `tenant.delete` job writes at its end. */
async function waitForReceipt(tenantId: string, timeoutMs: number, db: Db) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const receipt = await findTenantDeletionReceipt(tenantId, db);
    if (receipt) return receipt;
    if (Date.now() >= deadline) {
      throw new AppError("TIMEOUT", `no deletion receipt for ${tenantId} within ${timeoutMs} ms`, {
        userMessage: `The deletion is queued but not finished after ${timeoutMs / 1000} s: are the workers running (npm start or npm run workers)?`,
      });
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
