/**
 * `skillStorageBytes` caps the bytes of every skill a tenant uploaded, across its workspaces: concurrent
 * uploads on two workspaces never pass it together (the admission is the row written under the tenant's
 * quota lock), the refused ones leave no folder behind, the route answers 429, and deleting a skill or
 * purging a workspace frees its bytes.
 */
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { setTenantQuotaOverrides } from "@/server/modules/operator/tenant-quota.service";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { POST as uploadSkill } from "@/app/api/workspaces/[id]/skills/route";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { sumStoredSkillBytes } from "@/server/modules/quota/skill-storage.data";
import { findWorkspaceRecordForSystem } from "@/server/modules/workspace/workspace-lifecycle.data";
import { isAppError } from "@/server/shared/errors";
import { tarOf, VALID_SKILL_MD } from "@/test/unit/workspace/support/archives";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { closeProcessBerth, processBerth } from "@/server/composition/process-berth";
import { installTestBerth } from "@/test/setup/test-berth";

const PAD = 4_000;
const skillMd = (name: string) => VALID_SKILL_MD(name);
/** One skill's stored bytes: its SKILL.md and a padding file. */
const sizeOf = (name: string) => Buffer.byteLength(skillMd(name)) + PAD;
const skillTar = (name: string) =>
  tarOf([
    { name: `${name}/SKILL.md`, content: skillMd(name) },
    { name: `${name}/pad.bin`, content: Buffer.alloc(PAD, name.charCodeAt(name.length - 1)) },
  ]);

describe("the skill storage quota (a tenant's total across workspaces)", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    await installTestBerth({ engine: h.engine });
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await closeProcessBerth();
    await h.close();
  });

  it("admits exactly what fits of 8 concurrent uploads to two workspaces, and frees bytes on delete and purge", async () => {
    const names = Array.from({ length: 8 }, (_, i) => `skill-${i}`);
    const size = sizeOf(names[0]!);
    // Room for three skills and a half: never four.
    const limit = Math.floor(size * 3.5);
    await setTenantQuotaOverrides(
      cliOperatorActor(),
      { tenantId: tenant.scope.tenantId, overrides: { skillStorageBytes: limit } },
      processBerth().quota,
      processBerth().db,
    );
    const [a, b] = [await freshSession(tenant.scope), await freshSession(tenant.scope)];
    await h.service.resolveForSession(tenant.scope, a.session.id);
    await h.service.resolveForSession(tenant.scope, b.session.id);
    const content = h.content();
    const tars = await Promise.all(names.map(skillTar));
    const results = await Promise.allSettled(
      names.map((_, i) =>
        content.installSkillArchive(tenant.scope, (i % 2 ? a : b).workspaceId, {
          agentId: null,
          stream: Readable.from([tars[i]!]),
          format: "tar",
        }),
      ),
    );
    const admitted = results.filter((r) => r.status === "fulfilled");
    const refusals = results.flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : []));
    expect(admitted).toHaveLength(3);
    expect(refusals.map((e) => isAppError(e) && [e.code, e.details?.limit, e.details?.value])).toEqual(
      Array.from({ length: 5 }, () => ["QUOTA_EXCEEDED", "skillStorageBytes", limit]),
    );
    expect(await sumStoredSkillBytes(tenant.tenantId, processBerth().db)).toBe(3 * size);
    // A refused upload's folder was removed again: the workspaces hold only the admitted skills.
    const listed = [
      ...(await content.listSkills(tenant.scope, a.workspaceId, null)),
      ...(await content.listSkills(tenant.scope, b.workspaceId, null)),
    ];
    expect(listed).toHaveLength(3);

    // Over HTTP the refusal is a 429 naming the limit.
    const auth = processBerth().api.auth;
    const key = (
      await createApiKey(
        auth,
        tenant.scope,
        { name: "skills", role: "admin" },
        apiKeySecret(processBerth().config),
        processBerth().db,
      )
    ).plainKey;
    const refused = await uploadSkill(
      new Request(`http://berth.test/api/workspaces/${a.workspaceId}/skills`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/x-tar" },
        body: new Uint8Array(await skillTar("over-http")),
      }),
      { params: Promise.resolve({ id: a.workspaceId }) },
    );
    expect(refused.status).toBe(429);
    expect(JSON.stringify(await refused.json())).toContain("skill storage");

    // Deleting a skill frees its bytes: the next upload fits.
    const first = listed[0]!;
    const holder = (await content.listSkills(tenant.scope, a.workspaceId, null)).some(
      (s) => s.dir === first.dir,
    )
      ? a
      : b;
    await content.removeSkill(tenant.scope, holder.workspaceId, null, { dir: first.dir });
    expect(await sumStoredSkillBytes(tenant.tenantId, processBerth().db)).toBe(2 * size);
    await content.installSkillArchive(tenant.scope, holder.workspaceId, {
      agentId: null,
      stream: Readable.from([await skillTar("after-delete")]),
      format: "tar",
    });
    expect(await sumStoredSkillBytes(tenant.tenantId, processBerth().db)).toBe(
      2 * size + sizeOf("after-delete"),
    );

    // Purging a workspace frees the bytes of every skill it held; the other workspace's still count.
    await h.service.requestPurge(tenant.scope, a.workspaceId, { reason: "free skill storage" });
    await vi.waitFor(
      async () =>
        expect((await findWorkspaceRecordForSystem(a.workspaceId, processBerth().db))?.state).toBe("PURGED"),
      { timeout: 15_000 },
    );
    const kept = await content.listSkills(tenant.scope, b.workspaceId, null);
    expect(await sumStoredSkillBytes(tenant.tenantId, processBerth().db)).toBe(
      kept.reduce((sum, skill) => sum + sizeOf(skill.name), 0),
    );
  });
});
