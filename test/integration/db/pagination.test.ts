import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { createAgent, listAgents } from "@/server/modules/agent/agent.data";
import { appendAuditLog, listAuditLogs } from "@/server/modules/audit/audit.data";
import { createSession, listSessions } from "@/server/modules/session/session.data";
import { upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { listWorkspaces } from "@/server/modules/workspace/workspace-list.data";
import type { Page } from "@/server/shared/page";
import { createTestTenant, type TestTenant } from "./fixtures";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Cursor paging of the four tenant lists (agents, sessions, workspaces, audit logs) through the shared
 * pageArgs/paginate helpers: every row exactly once, in list order, and no cursor after the last page.
 */
const COUNT = 5;
let t: TestTenant;
let agentId: string;

type Lister = (options: { limit: number; cursor?: string }) => Promise<Page<{ id: string }>>;

/** Walks every page of `limit` rows; returns the pages' ids. */
async function walk(list: Lister, limit: number): Promise<string[][]> {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const page = await list({ limit, ...(cursor ? { cursor } : {}) });
    pages.push(page.items.map((item) => item.id));
    cursor = page.nextCursor ?? undefined;
    expect(pages.length).toBeLessThanOrEqual(COUNT + 1);
  } while (cursor);
  return pages;
}

beforeAll(async () => {
  t = await createTestTenant();
  const key = secretKeyFromBytes(Buffer.alloc(32, 9));
  for (let index = 0; index < COUNT; index += 1) {
    const agent = await createAgent(
      t.scope,
      { name: `pager-${index}`, modelConfig: { provider: "p", model: "m" } },
      key,
      processBerth().db,
    );
    agentId = agent.id;
    await upsertWorkspaceBinding(
      t.scope,
      {
        id: `page-ws-${randomUUID().slice(0, 8)}`,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
        agentId: agent.id,
      },
      { config: processBerth().config.quotas },
      processBerth().db,
    );
    await appendAuditLog(t.scope, { action: `pager.${index}`, outcome: "success" }, processBerth().db);
  }
  for (let index = 0; index < COUNT; index += 1) {
    await createSession(
      t.scope,
      { agentId, workspaceId: "page-ws-shared", name: `s${index}` },
      processBerth().db,
    );
  }
});

const listers: Record<string, Lister> = {
  agents: (options) => listAgents(t.scope, options, processBerth().db),
  sessions: (options) => listSessions(t.scope, options, processBerth().db),
  workspaces: (options) => listWorkspaces(t.scope, options, processBerth().db),
  "audit logs": (options) => listAuditLogs(t.scope, options, processBerth().db),
};

describe.each(Object.entries(listers))("%s", (_name, list) => {
  it("pages through every row once, in order, ending without a cursor", async () => {
    const all = (await list({ limit: 200 })).items.map((item) => item.id);
    expect(all.length).toBeGreaterThanOrEqual(COUNT);
    const pages = await walk(list, 2);
    expect(pages.flat()).toEqual(all);
    expect(pages.slice(0, -1).every((page) => page.length === 2)).toBe(true);
    expect(pages.at(-1)!.length).toBeGreaterThan(0);
  });

  it("a page exactly as long as what is left has no next cursor", async () => {
    const all = (await list({ limit: 200 })).items;
    expect((await list({ limit: all.length })).nextCursor).toBeNull();
    const short = await list({ limit: all.length - 1 });
    expect(short.nextCursor).toBe(short.items.at(-1)!.id);
    const rest = await list({ limit: all.length, cursor: short.nextCursor! });
    expect(rest.items.map((item) => item.id)).toEqual([all.at(-1)!.id]);
    expect(rest.nextCursor).toBeNull();
  });
});
