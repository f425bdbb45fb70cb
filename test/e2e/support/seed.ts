import { randomBytes, randomUUID } from "node:crypto";
import { createAuth } from "@/server/auth/auth";
import { resolveTenantScope } from "@/server/auth/resolve";
import { type TenantScope } from "@/server/auth/scope";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getDb } from "@/server/db";
import { createAgent } from "@/server/modules/agent/agent.data";
import { createSession } from "@/server/modules/session/session.data";
import { getTenantCounts } from "@/server/modules/tenant/tenant.data";
import { createTenantWithOwner } from "@/server/modules/tenant/tenant.service";
import { upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { processBerth } from "@/server/composition/process-berth";

export type SeededTenant = {
  slug: string;
  name: string;
  email: string;
  password: string;
  scope: TenantScope;
  counts: () => ReturnType<typeof getTenantCounts>;
};

/**
 * A tenant whose admin signs in through the browser, with a few agents, one workspace and sessions
 * bound to it, created through the app's own services (the rows the overview must count).
 */
export async function seedTenantWithData(options: {
  authSecret: string;
  baseUrl: string;
}): Promise<SeededTenant> {
  const auth = createAuth({
    secret: options.authSecret,
    baseUrl: options.baseUrl,
    prisma: getDb(),
    log: () => {},
  });
  const suffix = randomUUID().slice(0, 8);
  const email = `admin-${suffix}@example.test`;
  const password = `pw-${randomBytes(9).toString("base64url")}`;
  const { tenant, owner } = await createTenantWithOwner(
    auth,
    {
      tenantName: `E2E Tenant ${suffix}`,
      slug: `e2e-${suffix}`,
      email,
      password,
      name: "E2E Admin",
    },
    processBerth().db,
  );
  const scope = await resolveTenantScope(
    { kind: "user", userId: owner.id, email: owner.email, name: owner.name, authSessionId: "seed" },
    tenant.id,
    processBerth().db,
  );
  const secretKey = secretKeyFromBytes(randomBytes(32));
  const modelConfig = { provider: "openai-compatible", model: "test-model" };
  const agents = [];
  for (const name of ["researcher", "coder"])
    agents.push(await createAgent(scope, { name, modelConfig }, secretKey, processBerth().db));
  const workspaceId = `ws-e2e-${suffix}`;
  await upsertWorkspaceBinding(
    scope,
    {
      id: workspaceId,
      backendKind: "local",
      isolationPolicy: "PER_AGENT",
    },
    { config: processBerth().config.quotas },
    processBerth().db,
  );
  for (let i = 0; i < 3; i++)
    await createSession(scope, { agentId: agents[0]!.id, workspaceId, name: `s${i}` }, processBerth().db);
  return {
    slug: tenant.slug,
    name: tenant.name,
    email,
    password,
    scope,
    counts: () => getTenantCounts(scope, processBerth().db),
  };
}
