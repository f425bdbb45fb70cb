/**
 * `mcpServersPerScope`: the scope's declarations are counted and the new one added under one lock, so
 * concurrent adds never pass the limit; another scope of the same workspace has its own count.
 */
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { setTenantQuotaOverrides } from "@/server/modules/operator/tenant-quota.service";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isAppError } from "@/server/shared/errors";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { processBerth } from "@/server/composition/process-berth";

const EVERYTHING_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");

describe("the MCP servers per scope quota", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await h.close();
  });

  it("admits exactly the limit of 6 concurrent adds to one scope, naming the limit in the refusals", async () => {
    await setTenantQuotaOverrides(
      cliOperatorActor(),
      { tenantId: tenant.scope.tenantId, overrides: { mcpServersPerScope: 2 } },
      processBerth().quota,
      processBerth().db,
    );
    const { agent, session, workspaceId } = await freshSession(tenant.scope);
    await h.service.resolveForSession(tenant.scope, session.id);
    const declaration = (name: string) => ({
      name,
      is_stateful: true,
      mcp_config: { type: "stdio_mcp", command: process.execPath, args: [EVERYTHING_ENTRY, "stdio"] },
    });
    const content = h.content();
    const scope = { agentId: agent.id, sessionId: session.id };
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) =>
        content.addMcp(tenant.scope, workspaceId, scope, declaration(`m${i}`)),
      ),
    );
    const refusals = results.flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : []));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(2);
    expect(refusals.map((e) => isAppError(e) && [e.code, e.details])).toEqual(
      Array.from({ length: 4 }, () => ["QUOTA_EXCEEDED", { limit: "mcpServersPerScope", value: 2, used: 2 }]),
    );
    // Another scope of the workspace counts its own.
    const other = { agentId: agent.id, sessionId: "another" };
    await expect(content.addMcp(tenant.scope, workspaceId, other, declaration("m9"))).resolves.toEqual({
      name: "m9",
    });
  });
});
