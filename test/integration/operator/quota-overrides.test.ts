import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApiRuntime } from "@/server/api/context";
import { getDb } from "@/server/db";
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { grantOperator, revokeOperator } from "@/server/modules/operator/operator.service";
import { createTestApiRuntime } from "../api/support/api-test-runtime";
import {
  createTenantFixture,
  FIXTURE_PASSWORD,
  signInCookie,
  type TenantFixture,
} from "../api/support/tenant-fixtures";
import { callerWith, refusal } from "./support";
import { processBerth } from "@/server/composition/process-berth";

/**
 * A tenant's quota overrides belong to the operators (issue 15): `operator.tenants.setQuotaOverrides` is the
 * one way to set them from the API. The tenant's owner, its admin and viewer keys are refused with
 * FORBIDDEN `not_operator`, as is a revoked operator; an operator who is no member of the tenant sets them,
 * in the operator audit. The tenant's own budget stays its owner's.
 */
describe("who may set a tenant's quota overrides", () => {
  let runtime: ApiRuntime;
  let t: TenantFixture;
  let operator: { email: string; cookie: string };

  beforeAll(async () => {
    runtime = createTestApiRuntime();
    t = await createTenantFixture(runtime, "quota-roles");
    const email = `quota-op-${randomUUID().slice(0, 8)}@example.test`;
    await runtime.auth.api.signUpEmail({ body: { email, password: FIXTURE_PASSWORD, name: "Quota Op" } });
    await grantOperator(cliOperatorActor(), { email }, processBerth().db);
    operator = { email, cookie: await signInCookie(runtime.auth, email, FIXTURE_PASSWORD) };
    // Another operator, so revoking this one is never refused as the last.
    const spare = `quota-spare-${randomUUID().slice(0, 8)}@example.test`;
    await runtime.auth.api.signUpEmail({ body: { email: spare, password: FIXTURE_PASSWORD, name: "Spare" } });
    await grantOperator(cliOperatorActor(), { email: spare }, processBerth().db);
  });
  afterAll(async () => {
    await revokeOperator(cliOperatorActor(), { email: operator.email }, processBerth().db).catch(
      () => undefined,
    );
  });

  const set = (headers: Record<string, string>, liveWorkspaces: number) =>
    callerWith(runtime, headers).operator.tenants.setQuotaOverrides({
      tenantId: t.tenant.id,
      overrides: { liveWorkspaces },
    });

  it("refuses the owner, admin and viewer keys and a revoked operator; an operator sets them", async () => {
    const owner = { cookie: t.owner.cookie };
    const viewer = { cookie: t.viewer.cookie };
    const adminKey = { authorization: `Bearer ${t.adminKey.plainKey}` };
    const viewerKey = { authorization: `Bearer ${t.viewerKey.plainKey}` };
    for (const headers of [owner, viewer, adminKey, viewerKey]) {
      expect(await refusal(set(headers, 1_000))).toEqual({ code: "FORBIDDEN", reason: "not_operator" });
    }
    // The tenant procedure the owner gate used to answer is gone.
    expect("setOverrides" in callerWith(runtime, owner).quota).toBe(false);

    const usage = await set({ cookie: operator.cookie }, 7);
    expect(usage.limits.find((item) => item.limit === "liveWorkspaces")).toMatchObject({
      value: 7,
      overridden: true,
    });
    // Admins read the new limit; the owner's budget is still the owner's.
    const read = await callerWith(runtime, owner).quota.usage({ tenantId: t.tenant.id });
    expect(read.limits.find((item) => item.limit === "liveWorkspaces")?.value).toBe(7);
    await expect(
      callerWith(runtime, owner).quota.setBudget({ tenantId: t.tenant.id, monthlyBudgetUnits: 10 }),
    ).resolves.toMatchObject({ budget: { monthlyBudgetUnits: 10 } });
    expect(
      await getDb().operatorAuditLog.findMany({
        where: { targetId: t.tenant.id, action: "tenant.quota.update" },
        select: { outcome: true, details: true },
      }),
    ).toEqual([{ outcome: "success", details: { liveWorkspaces: 7 } }]);

    await revokeOperator(cliOperatorActor(), { email: operator.email }, processBerth().db);
    expect(await refusal(set({ cookie: operator.cookie }, 9))).toEqual({
      code: "FORBIDDEN",
      reason: "not_operator",
    });
  });
});
