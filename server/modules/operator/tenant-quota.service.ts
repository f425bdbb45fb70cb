import type { z } from "zod";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import { appendOperatorAudit } from "@/server/modules/operator/operator.data";
import { operatorAuditActor, type OperatorActor } from "@/server/modules/operator/operator-actor";
import { ZTenantQuotaOverridesRequest, ZTenantRef } from "@/server/modules/operator/operator.types";
import { findTenantWithUsage } from "@/server/modules/operator/tenant-admin.data";
import { readTenantUsage } from "@/server/modules/quota/quota-admin.service";
import { saveQuotaOverrides } from "@/server/modules/quota/quota.data";
import type { QuotaDeps } from "@/server/modules/quota/quota.service";
import type { TenantUsageView } from "@/server/modules/quota/quota.types";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";
import type { Db } from "@/server/db";

/**
 * A tenant's quota overrides are the installation's business, not the tenant's: only an operator (the
 * `operator.tenants.setQuotaOverrides` procedure, or the CLI) replaces them, and the change is in the
 * operator audit. Tenant admins read their limits and usage (`quota.usage`) but cannot raise them.
 */
export async function setTenantQuotaOverrides(
  actor: OperatorActor,
  raw: z.input<typeof ZTenantQuotaOverridesRequest>,
  deps: QuotaDeps,
  db: Db,
): Promise<TenantUsageView> {
  const { tenantId: ref, overrides } = parseInput(ZTenantQuotaOverridesRequest, raw);
  const tenant = await findTenantWithUsage(ref, db);
  if (!tenant) throw new AppError("NOT_FOUND", `no tenant ${ref}`, { userMessage: `No tenant ${ref}.` });
  await saveQuotaOverrides(tenant.id, overrides, db);
  await appendOperatorAudit(
    {
      actor: operatorAuditActor(actor),
      action: "tenant.quota.update",
      targetType: "tenant",
      targetId: tenant.id,
      targetLabel: tenant.slug,
      outcome: "success",
      details: overrides,
    },
    db,
  );
  return readTenantUsage(await resolveSystemTenantScope(tenant.id, { allowSuspended: true }, db), deps, db);
}

/** A tenant's limits (effective value, overridden or the installation's default) and its use, for operators. */
export async function readTenantQuota(
  _actor: OperatorActor,
  raw: z.input<typeof ZTenantRef>,
  deps: QuotaDeps,
  db: Db,
): Promise<TenantUsageView> {
  const { tenantId: ref } = parseInput(ZTenantRef, raw);
  const tenant = await findTenantWithUsage(ref, db);
  if (!tenant) throw new AppError("NOT_FOUND", `no tenant ${ref}`, { userMessage: `No tenant ${ref}.` });
  return readTenantUsage(await resolveSystemTenantScope(tenant.id, { allowSuspended: true }, db), deps, db);
}
