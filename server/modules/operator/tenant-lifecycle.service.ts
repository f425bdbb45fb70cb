import type { z } from "zod";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import { issueInviteLink, type LinkSecret, replayInvite } from "@/server/modules/member/invite.service";
import { appendOperatorAudit } from "@/server/modules/operator/operator.data";
import {
  operatorActorLabel,
  operatorAuditActor,
  type OperatorActor,
} from "@/server/modules/operator/operator-actor";
import {
  type OperatorTenantDetail,
  type OperatorTenantView,
  type TenantCreated,
  type TenantStatus,
  ZTenantCreateRequest,
  ZTenantRef,
  ZTenantSuspendRequest,
} from "@/server/modules/operator/operator.types";
import {
  findTenantByCreateKey,
  findTenantWithUsage,
  insertEmptyTenant,
  listOwnerInvites,
  listTenantOwners,
  listTenantsWithUsage,
  listTenantWorkspaceIds,
  liveWorkspaceStates,
  transitionTenantStatus,
} from "@/server/modules/operator/tenant-admin.data";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import { AppError } from "@/server/shared/errors";
import { createOnce } from "@/server/shared/idempotency";
import { parseInput } from "@/server/shared/parse-input";
import type { Db } from "@/server/db";

/**
 * The tenant lifecycle operators drive: create (with the first owner invited), suspend, resume, delete.
 * Each step is one conditional status change (so two operators racing get one winner and a typed CONFLICT),
 * recorded in the operator audit. Suspension deletes nothing: it stops workspaces through the ordinary
 * `workspace.stop` jobs, and the gates (server/auth/resolve.ts) refuse the tenant's cookies, keys and jobs.
 */

function notFound(ref: string): AppError {
  return new AppError("NOT_FOUND", `no tenant ${ref}`, { userMessage: `No tenant ${ref}.` });
}

async function requireTenant(ref: string, db: Db): Promise<OperatorTenantView> {
  const tenant = await findTenantWithUsage(ref, db);
  if (!tenant) throw notFound(ref);
  return tenant;
}

function wrongStatus(tenant: OperatorTenantView, action: string, expected: string): AppError {
  return new AppError("CONFLICT", `tenant ${tenant.slug} is ${tenant.status}, cannot ${action}`, {
    userMessage: `Tenant ${tenant.slug} is ${tenant.status}: only ${expected} tenants can be ${action}ed.`,
    details: { reason: "tenant_status", status: tenant.status },
  });
}

export function listTenantsForOperator(_actor: OperatorActor, db: Db): Promise<OperatorTenantView[]> {
  return listTenantsWithUsage(db);
}

/** One tenant (by id or slug) with its owners and owner invitations. */
export async function readTenantForOperator(
  _actor: OperatorActor,
  raw: z.input<typeof ZTenantRef>,
  db: Db,
): Promise<OperatorTenantDetail> {
  const { tenantId } = parseInput(ZTenantRef, raw);
  const tenant = await requireTenant(tenantId, db);
  const [owners, ownerInvites] = await Promise.all([
    listTenantOwners(tenant.id, db),
    listOwnerInvites(tenant.id, db),
  ]);
  return { ...tenant, owners, ownerInvites };
}

/**
 * An operator's idempotency key as stored: `operator_<user id or cli>:<key>` (`purpose` keeps the owner
 * invitation a tenant create makes apart from a later `inviteOwner` with the same key). Tenant admins' keys
 * start with `user_` or `key_`, so the two never meet in a tenant's invitations.
 */
function operatorCreateKey(actor: OperatorActor, key: string, purpose?: string): string {
  return `operator_${actor.userId ?? "cli"}:${purpose ? `${purpose}:` : ""}${key}`;
}

/**
 * An invitation to become the tenant's owner: the link (`/invite/<token>`) is returned once, or, with a
 * `createKey`, again for the same key (the token is derived from it, see invite.service.ts).
 */
async function inviteOwner(
  actor: OperatorActor,
  tenantId: string,
  link: { note: string; expiresInHours: number; createKey: string | null },
  secret: LinkSecret,
  db: Db,
) {
  const scope = await resolveSystemTenantScope(tenantId, { allowSuspended: true }, db);
  let created = false;
  const { invite, token } = await createOnce(link.createKey, {
    earlier: async (createKey) => {
      const first = await replayInvite(scope, createKey, secret, db);
      return first ? { result: first, createdAt: first.invite.createdAt } : null;
    },
    create: async (createKey) => {
      const issued = await issueInviteLink(
        scope,
        {
          role: "owner",
          note: link.note,
          expiresInHours: link.expiresInHours,
          // The operator's user id (tenant admins then see their email on the invitation), or "cli".
          createdById: actor.userId ?? "cli",
        },
        createKey ? { createKey, ...secret } : secret,
        db,
      );
      created = true;
      return issued;
    },
  });
  // `created`: false when an earlier (or concurrent) create with the same key made it (nothing to audit).
  return {
    ownerInvite: { inviteId: invite.id, path: `/invite/${token}`, expiresAt: invite.expiresAt },
    created,
  };
}

/**
 * A tenant and its first owner's invitation. With `idempotencyKey`, the same key from the same operator
 * (24 hours) answers with that tenant and the same link; a concurrent twin loses on the unique key (or slug)
 * and answers the same.
 */
export async function createTenant(
  actor: OperatorActor,
  raw: z.input<typeof ZTenantCreateRequest>,
  secret: LinkSecret,
  db: Db,
): Promise<TenantCreated> {
  const input = parseInput(ZTenantCreateRequest, raw);
  const key = input.idempotencyKey;
  const ownerLink = (createKey: string | null) => ({
    note: input.ownerNote,
    expiresInHours: input.expiresInHours,
    createKey: createKey && key ? operatorCreateKey(actor, key, "tenant-create") : null,
  });
  return createOnce(key ? operatorCreateKey(actor, key) : null, {
    earlier: async (createKey) => {
      const first = await findTenantByCreateKey(createKey, db);
      if (!first) return null;
      // The owner's invitation with its derived link; made here when the first create has not made it yet.
      const { ownerInvite } = await inviteOwner(actor, first.id, ownerLink(createKey), secret, db);
      return {
        result: { tenant: await requireTenant(first.id, db), ownerInvite },
        createdAt: first.createdAt,
      };
    },
    create: async (createKey) => {
      const row = await insertEmptyTenant({ name: input.name, slug: input.slug, createKey }, db);
      if (!row) {
        throw new AppError("CONFLICT", `slug ${input.slug} is taken`, {
          userMessage: `A tenant with the slug ${input.slug} already exists.`,
          details: { field: "slug" },
        });
      }
      const { ownerInvite } = await inviteOwner(actor, row.id, ownerLink(createKey), secret, db);
      await appendOperatorAudit(
        {
          actor: operatorAuditActor(actor),
          action: "tenant.create",
          targetType: "tenant",
          targetId: row.id,
          targetLabel: row.slug,
          outcome: "success",
          details: { name: row.name, ownerInviteId: ownerInvite.inviteId },
        },
        db,
      );
      return { tenant: await requireTenant(row.id, db), ownerInvite };
    },
  });
}

/**
 * A new owner invitation for an existing tenant (the first one expired, or another owner is wanted). With
 * `idempotencyKey`, the same key from the same operator (24 hours) answers with the first invitation.
 */
export async function createOwnerInvite(
  actor: OperatorActor,
  raw: z.input<typeof ZTenantRef> & { note?: string; expiresInHours?: number; idempotencyKey?: string },
  secret: LinkSecret,
  db: Db,
) {
  const { tenantId } = parseInput(ZTenantRef, { tenantId: raw.tenantId });
  const input = parseInput(
    ZTenantCreateRequest.pick({ ownerNote: true, expiresInHours: true, idempotencyKey: true }),
    { ownerNote: raw.note, expiresInHours: raw.expiresInHours, idempotencyKey: raw.idempotencyKey },
  );
  const tenant = await requireTenant(tenantId, db);
  if (tenant.status === "deleting") throw wrongStatus(tenant, "invite", "active or suspended");
  const { ownerInvite: invite, created } = await inviteOwner(
    actor,
    tenant.id,
    {
      note: input.ownerNote,
      expiresInHours: input.expiresInHours,
      createKey: input.idempotencyKey ? operatorCreateKey(actor, input.idempotencyKey) : null,
    },
    secret,
    db,
  );
  // A replay answers with the first invitation and audits nothing again.
  if (!created) return invite;
  await appendOperatorAudit(
    {
      actor: operatorAuditActor(actor),
      action: "tenant.invite-owner",
      targetType: "tenant",
      targetId: tenant.id,
      targetLabel: tenant.slug,
      outcome: "success",
      details: { inviteId: invite.inviteId },
    },
    db,
  );
  return invite;
}

async function moveTenant(
  actor: OperatorActor,
  tenantRef: string,
  move: { action: "suspend" | "resume"; from: TenantStatus; to: TenantStatus; reason?: string },
  db: Db,
): Promise<OperatorTenantView> {
  const tenant = await requireTenant(tenantRef, db);
  if (!(await transitionTenantStatus(tenant.id, [move.from], move.to, db))) {
    throw wrongStatus(await requireTenant(tenant.id, db), move.action, move.from);
  }
  await appendOperatorAudit(
    {
      actor: operatorAuditActor(actor),
      action: `tenant.${move.action}`,
      targetType: "tenant",
      targetId: tenant.id,
      targetLabel: tenant.slug,
      outcome: "success",
      details: move.reason ? { reason: move.reason } : undefined,
    },
    db,
  );
  return tenant;
}

/**
 * active → suspended, then a `workspace.stop` job for each workspace holding a machine. From the status
 * change on, every gate refuses the tenant (typed FORBIDDEN, `details.reason: "tenant_suspended"`).
 */
export async function suspendTenant(
  actor: OperatorActor,
  raw: z.input<typeof ZTenantSuspendRequest>,
  /** The root's queues: the stops are jobs. */
  queues: QueueSet<BerthJobCatalog>,
  db: Db,
): Promise<{ tenant: OperatorTenantView; stopsRequested: string[] }> {
  const input = parseInput(ZTenantSuspendRequest, raw);
  const tenant = await moveTenant(
    actor,
    input.tenantId,
    {
      action: "suspend",
      from: "active",
      to: "suspended",
      reason: input.reason,
    },
    db,
  );
  const live = await listTenantWorkspaceIds(tenant.id, { states: liveWorkspaceStates }, db);
  const enqueue = createEnqueue(queues);
  for (const workspaceId of live) {
    await enqueue("workspace.stop", { tenantId: tenant.id, workspaceId, reason: "tenant suspended" });
  }
  return { tenant: await requireTenant(tenant.id, db), stopsRequested: live };
}

/** suspended → active. Workspaces stay stopped; each one's next use provisions it again, as after a sweep. */
export async function resumeTenant(
  actor: OperatorActor,
  raw: z.input<typeof ZTenantRef>,
  db: Db,
): Promise<{ tenant: OperatorTenantView; stopsRequested: string[] }> {
  const input = parseInput(ZTenantRef, raw);
  const tenant = await moveTenant(
    actor,
    input.tenantId,
    {
      action: "resume",
      from: "suspended",
      to: "active",
    },
    db,
  );
  return { tenant: await requireTenant(tenant.id, db), stopsRequested: [] };
}

/**
 * active | suspended → deleting (refused from then on, like a suspension), then the `tenant.delete` job
 * (server/modules/operator/tenant-deletion.service.ts). A tenant already deleting gets its job again
 * (the id deduplicates), so a retry after a lost response is safe.
 */
export async function requestTenantDeletion(
  actor: OperatorActor,
  raw: z.input<typeof ZTenantRef>,
  /** The root's queues: the deletion is a job. */
  queues: QueueSet<BerthJobCatalog>,
  db: Db,
): Promise<{ tenantId: string; jobId: string }> {
  const { tenantId: ref } = parseInput(ZTenantRef, raw);
  const tenant = await requireTenant(ref, db);
  const moved = await transitionTenantStatus(tenant.id, ["active", "suspended"], "deleting", db);
  if (!moved && tenant.status !== "deleting") throw wrongStatus(tenant, "delete", "active or suspended");
  if (moved) {
    await appendOperatorAudit(
      {
        actor: operatorAuditActor(actor),
        action: "tenant.delete",
        targetType: "tenant",
        targetId: tenant.id,
        targetLabel: tenant.slug,
        outcome: "success",
        details: { phase: "requested", previousStatus: tenant.status },
      },
      db,
    );
  }
  const job = await createEnqueue(queues)("tenant.delete", {
    tenantId: tenant.id,
    actor: operatorActorLabel(actor),
  });
  return { tenantId: tenant.id, jobId: job.id ?? "" };
}
