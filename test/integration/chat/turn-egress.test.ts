import { randomUUID } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDb } from "@/server/db";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { getQueues } from "@/server/queue/queues";
import { getRedis } from "@/server/redis";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { startEgressTarget } from "@/test/support/egress-target";
import { sendChat, startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { closeProcessBerth, processBerth } from "@/server/composition/process-berth";

/**
 * Egress and secrets (issue 25) end to end: real turns whose Bash runs curl in a bubblewrap workspace
 * (real Postgres, Redis, workers; only the model is the loopback fake), against loopback HTTP servers on the
 * host that only the host's egress proxy can reach. The secret's value must reach the bound server and
 * appear nowhere else: not in the workspace, the transcript or any table.
 */
const SECRET = `egress-value-${randomUUID()}`;

let h: AgentApiHarness;
let fake: FakeModelServer;
let allowed: Awaited<ReturnType<typeof startEgressTarget>>;
let other: Awaited<ReturnType<typeof startEgressTarget>>;

beforeAll(async () => {
  h = await startAgentApiHarness("egress");
  fake = await startFakeModel({ apiKey: "sk-eg" });
  allowed = await startEgressTarget();
  other = await startEgressTarget();
});
afterAll(async () => {
  await fake?.close();
  await allowed?.close();
  await other?.close();
  await h?.close();
  await closeProcessBerth();
});

/** One turn whose model runs `command` in Bash, then answers; the tool's output. */
async function bash(sessionId: string, command: string): Promise<string> {
  fake.enqueue(
    {
      kind: "tool-calls",
      calls: [{ id: `c_${randomUUID().slice(0, 8)}`, name: "Bash", arguments: { command } }],
    },
    { kind: "text", text: "done" },
  );
  const events = await sendChat(h.owner, { ...h.ref, sessionId, message: command });
  expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
  const result = events.find((event) => event.type === "tool-result") as { output: string } | undefined;
  return result?.output ?? "";
}

// NO_PROXY names 127.0.0.1 (the sandbox's own loopback): the host's is reached through the proxy explicitly.
const curl = (args: string) => `curl -sS -m 10 --noproxy '' ${args}`;

describe("egress and secrets through real turns", () => {
  it(
    "off by default; allow-list, refusals counted, secret only to its host and nowhere else",
    { timeout: 180_000 },
    async () => {
      const agent = await h.owner.agent.create({
        ...h.ref,
        name: `eg-${randomUUID().slice(0, 6)}`,
        modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-eg" },
        env: { API_TOKEN: "berth-secret://api-token" },
      });
      const { sessionId, workspaceId } = await h.owner.session.create({ ...h.ref, agentId: agent.id });

      // Off (the default): no proxy variables, no route to the host.
      const off = await bash(
        sessionId,
        `env | grep -ci _proxy; ${curl(`http://127.0.0.1:${allowed.port}/off`)}`,
      );
      expect(off).toMatch(/Stdout:\n0\n[\s\S]*Couldn't connect to server/);
      expect(allowed.received).toHaveLength(0);

      await h.owner.egress.setTenantPolicy({
        ...h.ref,
        policy: {
          mode: "allowlist",
          allow: [
            { host: "127.0.0.1", ports: [allowed.port] },
            { host: "localhost", ports: [allowed.port] },
          ],
        },
      });
      const created = await h.owner.egress.createTenantSecret({
        ...h.ref,
        name: "api-token",
        value: SECRET,
        hosts: ["127.0.0.1"],
      });
      expect(created).toMatchObject({ hint: SECRET.slice(-4), placeholder: "berth-secret://api-token" });
      expect(JSON.stringify(created)).not.toContain(SECRET);
      expect(JSON.stringify(await h.owner.egress.tenantSecrets(h.ref))).not.toContain(SECRET);

      const ok = await bash(sessionId, curl(`http://127.0.0.1:${allowed.port}/plain`));
      expect(ok).toContain("hello from the host (/plain)");
      const refused = await bash(sessionId, curl(`http://127.0.0.1:${other.port}/refused`));
      expect(refused).toMatch(/Berth egress proxy refused GET 127\.0\.0\.1:\d+: .*not on the allow-list/);
      expect(other.received).toHaveLength(0);

      // The placeholder becomes the value toward the bound host only.
      const sent = await bash(
        sessionId,
        curl(`-H "Authorization: Bearer $API_TOKEN" http://127.0.0.1:${allowed.port}/secret`),
      );
      expect(sent).toContain("(/secret)");
      expect(allowed.received.at(-1)?.headers.authorization).toBe(`Bearer ${SECRET}`);
      const unbound = await bash(
        sessionId,
        curl(`-H "Authorization: Bearer $API_TOKEN" http://localhost:${allowed.port}/leak`),
      );
      expect(unbound).toMatch(/secret api-token may not be sent to localhost/);
      expect(allowed.received.map((r) => r.url)).not.toContain("/leak");

      // The workspace never holds the value: environment, every process' environ, its files.
      const look = await bash(
        sessionId,
        "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; ls -la /workspace",
      );
      expect(look).toContain("berth-secret://api-token");
      expect(look).not.toContain(SECRET);
      const record = await getDb().workspace.findUniqueOrThrow({ where: { id: workspaceId } });
      const folder = (record.backendHandle as { folder?: string } | null)?.folder;
      expect(folder).toBeTruthy();
      for (const entry of await fs.readdir(folder!, { recursive: true })) {
        const file = path.join(folder!, entry);
        if ((await fs.stat(file)).isFile())
          expect(await fs.readFile(file, "utf8"), entry).not.toContain(SECRET);
      }

      // Counted per workspace, newest first, with the placeholder's name (never its value).
      const status = await h.owner.egress.workspaceStatus({ ...h.ref, workspaceId });
      expect(status.tenantPolicy.mode).toBe("allowlist");
      expect(status.refusedCount).toBe(2);
      expect(status.lastRefused.map((r) => [r.host, r.reason])).toEqual([
        ["localhost", "secret_host_not_bound"],
        ["127.0.0.1", "host_not_allowed"],
      ]);

      // An agent's own policy replaces the tenant's: off again for this agent.
      await h.owner.egress.setAgentPolicy({
        ...h.ref,
        agentId: agent.id,
        policy: { mode: "off", allow: [] },
      });
      const agentOff = await bash(
        sessionId,
        `env | grep -ci _proxy; ${curl(`http://127.0.0.1:${allowed.port}/agent-off`)}`,
      );
      expect(agentOff).toMatch(/Stdout:\n0\n[\s\S]*Couldn't connect to server/);
      expect(allowed.received.map((r) => r.url)).not.toContain("/agent-off");

      // Audited (buffered, then flushed).
      await flushAuditBuffer({
        redis: getRedis(),
        redisPrefix: getQueues().redisPrefix,
        db: processBerth().db,
      });
      const actions = (await h.owner.audit.list({ ...h.ref, limit: 200 })).items.map((entry) => entry.action);
      expect(actions).toContain("workspace.egress.refused");
      expect(actions).toContain("egress.secret.create");

      // Nowhere in the transcript, nor in any table's text (a pg_dump-style search).
      expect(JSON.stringify(await h.owner.chat.history({ ...h.ref, sessionId }))).not.toContain(SECRET);
      const tables = await getDb().$queryRaw<Array<{ name: string }>>`
      SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()`;
      expect(tables.length).toBeGreaterThan(10);
      for (const { name } of tables) {
        const rows = await getDb().$queryRawUnsafe<Array<{ n: bigint }>>(
          `SELECT count(*) AS n FROM "${name}" t WHERE t::text LIKE $1`,
          `%${SECRET}%`,
        );
        expect(Number(rows[0]?.n), name).toBe(0);
      }
    },
  );
});
