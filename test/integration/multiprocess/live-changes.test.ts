/**
 * The live dashboard's change feed across API replicas, and agent deletion stopping its workspaces: two API
 * processes as `npm start` composes them (start-api-process.ts, each with its in-process workers, one Redis
 * prefix of their own), real Postgres, Redis and local (bubblewrap) workspaces.
 * - A page's `live.changes` stream (SSE) on replica A hears a workspace started and stopped through
 *   replica B (and the workers that ran the jobs), with its state, after its `ready` event; a viewer's
 *   stream hears the workspace too, but never the jobs (an admin's page).
 * - `agent.delete` on an agent whose session's workspace is READY stops that workspace (it stayed READY until
 *   the idle sweep), and a Send on the deleted session answers NOT_FOUND naming the deleted agent
 *   (`details.reason: "agent_deleted"`) instead of a bare "Session not found.".
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { TRPCClientError } from "@trpc/client";
import superjson from "superjson";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { createBerthClient, type BerthClient } from "@/server/client/create-berth-client";
import { getDb } from "@/server/db";
import { TEST_BASE_URL } from "../api/support/api-test-runtime";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { bundled, startChild, stopChildren, type Child } from "./processes";
import { closeProcessBerth } from "@/server/composition/process-berth";

type Change = { topic: string; id?: string; state?: string };

/**
 * A `live.changes` subscription as the browser's EventSource makes it (GET, `text/event-stream`), read with
 * fetch: every data event, deserialised, in order.
 */
async function openChangeStream(baseUrl: string, apiKey: string, input: Record<string, unknown>) {
  const controller = new AbortController();
  const query = encodeURIComponent(JSON.stringify(superjson.serialize(input)));
  const response = await fetch(`${baseUrl}/api/trpc/live.changes?input=${query}`, {
    headers: { authorization: `Bearer ${apiKey}`, accept: "text/event-stream" },
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toContain("text/event-stream");
  const changes: Change[] = [];
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of response.body!) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data: "))
          .map((line) => line.slice("data: ".length))
          .join("\n");
        // Named events are tRPC's own (connected, ping, return, serialized-error); data events are ours.
        if (event || !data) continue;
        changes.push(
          superjson.deserialize<Change>(JSON.parse(data) as Parameters<typeof superjson.deserialize>[0]),
        );
      }
    }
  })().catch(() => undefined);
  return {
    changes,
    close: async () => {
      controller.abort();
      await reading;
    },
  };
}

describe("live changes across API replicas, and agent deletion", { timeout: 180_000 }, () => {
  let replicas: Child[] = [];
  let urls: string[] = [];
  let basedir: string;
  let a: TenantFixture;
  let failed = false;
  let viaA: BerthClient;
  let viaB: BerthClient;

  beforeAll(async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-live-")));
    // The sandboxed workspaces' uids must be able to pass through to their folders.
    await fs.chmod(basedir, 0o711);
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: TEST_BASE_URL,
      prisma: getDb(),
      log: () => {},
    });
    a = await createTenantFixture({ auth } as Parameters<typeof createTenantFixture>[0], "live");
    const env = {
      MP_NEXT_COPY: bundled("next-copy-entry.ts"),
      // Shared by both replicas (one change channel, one set of queues), no other test's.
      BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-live-${randomBytes(3).toString("hex")}`,
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      LOG_LEVEL: "warn",
    };
    replicas = [startChild("start-api-process.ts", env), startChild("start-api-process.ts", env)];
    urls = await Promise.all(
      replicas.map(async (child) =>
        (await child.nextLine((line) => line.startsWith("ready "))).slice("ready ".length),
      ),
    );
    viaA = createBerthClient({ url: urls[0]!, apiKey: a.adminKey.plainKey });
    viaB = createBerthClient({ url: urls[1]!, apiKey: a.adminKey.plainKey });
  }, 180_000);

  afterAll(async () => {
    await stopChildren(replicas, failed);
    await closeProcessBerth();
    await fs.rm(basedir, { recursive: true, force: true });
  });

  async function agentWithSession() {
    const agent = await viaB.agent.create.mutate({
      tenantId: a.tenant.id,
      name: `live-${randomBytes(3).toString("hex")}`,
      modelConfig: { baseUrl: "http://127.0.0.1:9/v1", model: "none" },
    });
    const session = await viaB.session.create.mutate({ tenantId: a.tenant.id, agentId: agent.id });
    return { agentId: agent.id, sessionId: session.sessionId, workspaceId: session.workspaceId };
  }

  async function stateOf(workspaceId: string) {
    return (await viaA.workspace.get.query({ tenantId: a.tenant.id, workspaceId })).state;
  }

  it("streams a workspace's changes made through one replica to a page listening on the other", async () => {
    try {
      const { workspaceId } = await agentWithSession();
      const admin = await openChangeStream(urls[0]!, a.adminKey.plainKey, { tenantId: a.tenant.id });
      const viewer = await openChangeStream(urls[0]!, a.viewerKey.plainKey, { tenantId: a.tenant.id });
      try {
        await vi.waitFor(() => {
          expect(admin.changes[0]).toEqual({ topic: "ready" });
          expect(viewer.changes[0]).toEqual({ topic: "ready" });
        });
        await viaB.workspace.start.mutate({ tenantId: a.tenant.id, workspaceId });
        const heard = (stream: typeof admin, state: string) =>
          stream.changes.some(
            (change) => change.topic === "workspace" && change.id === workspaceId && change.state === state,
          );
        await vi.waitFor(() => expect(heard(admin, "READY")).toBe(true), { timeout: 60_000, interval: 100 });
        await viaB.workspace.stop.mutate({ tenantId: a.tenant.id, workspaceId, force: true });
        await vi.waitFor(() => expect(heard(admin, "STOPPED")).toBe(true), {
          timeout: 30_000,
          interval: 100,
        });
        expect(heard(admin, "STOPPING")).toBe(true);
        // The workers said when the provision and the stop ran: the jobs page's topic, for admins.
        expect(admin.changes.some((change) => change.topic === "job")).toBe(true);
        await vi.waitFor(() => expect(heard(viewer, "STOPPED")).toBe(true), {
          timeout: 5_000,
          interval: 100,
        });
        expect(viewer.changes.some((change) => change.topic === "job")).toBe(false);
      } finally {
        await admin.close();
        await viewer.close();
      }
    } catch (error) {
      failed = true;
      throw error;
    }
  });

  it("stops a deleted agent's running workspace and tells a Send on its session what happened", async () => {
    try {
      const { agentId, sessionId, workspaceId } = await agentWithSession();
      await viaB.workspace.start.mutate({ tenantId: a.tenant.id, workspaceId });
      await vi.waitFor(async () => expect(await stateOf(workspaceId)).toBe("READY"), {
        timeout: 60_000,
        interval: 200,
      });

      const removal = await viaA.agent.delete.mutate({ tenantId: a.tenant.id, agentId });
      // It stayed READY (and metered) until the idle sweep: the deletion now stops it.
      await vi.waitFor(async () => expect(await stateOf(workspaceId)).toBe("STOPPED"), {
        timeout: 30_000,
        interval: 200,
      });
      expect(removal.stoppedWorkspaceIds).toEqual([workspaceId]);

      const refused = await viaB.chat.send
        .mutate({ tenantId: a.tenant.id, sessionId, message: "still there?" })
        .then(
          () => null,
          (error: unknown) => error,
        );
      expect(refused).toBeInstanceOf(TRPCClientError);
      const error = refused as TRPCClientError<never>;
      expect(error.message).toMatch(/agent ".*" was deleted/);
      const data = error.data as unknown as {
        code: string;
        appError: { code: string; details: Record<string, unknown> };
      };
      expect(data.code).toBe("NOT_FOUND");
      expect(data.appError.details).toMatchObject({ reason: "agent_deleted", sessionId, agentId });
    } catch (error) {
      failed = true;
      throw error;
    }
  });
});
