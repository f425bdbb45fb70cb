import { createCaller } from "@/server/api/root";
import type { ApiRuntime } from "@/server/api/context";
import { contextFromHeaders, createTestApiRuntime } from "../api/support/api-test-runtime";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { installTestBerth } from "@/test/setup/test-berth";

/**
 * The API as one process runs it, for agent/session/chat tests: the routers over a real engine (local
 * backend) whose provisioning runs in in-process workers on real Redis queues, a tenant with a signed-in
 * owner, and tRPC callers authenticated for real.
 */
export type AgentApiHarness = {
  workspace: WorkspaceHarness;
  runtime: ApiRuntime;
  tenant: TenantFixture;
  owner: ReturnType<typeof createCaller>;
  viewer: ReturnType<typeof createCaller>;
  ref: { tenantId: string };
  close(): Promise<void>;
};

export async function startAgentApiHarness(label: string): Promise<AgentApiHarness> {
  const workspace = await startWorkspaceHarness();
  await installTestBerth({ engine: workspace.engine });
  const runtime = createTestApiRuntime();
  const tenant = await createTenantFixture(runtime, label);
  return {
    workspace,
    runtime,
    tenant,
    owner: createCaller(contextFromHeaders(runtime, { cookie: tenant.owner.cookie })),
    viewer: createCaller(contextFromHeaders(runtime, { cookie: tenant.viewer.cookie })),
    ref: { tenantId: tenant.tenant.id },
    async close() {
      await closeProcessBerth();
      await workspace.close();
    },
  };
}

/**
 * Runs one chat turn through the tRPC caller and returns its events: the one place tests depend on how
 * `chat.send` is transported.
 */
export async function sendChat(
  caller: ReturnType<typeof createCaller>,
  input: { tenantId: string; sessionId: string; message: string; checkpointFirst?: boolean },
) {
  return collect(await caller.chat.send(input));
}

/** Drains a subscription's events. */
export async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const events: T[] = [];
  for await (const event of stream) events.push(event);
  return events;
}
