import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { runRootChore } from "@/server/workspace/drivers/docker/docker-exec";
import type { DockerWorkspaceHandle } from "@/server/workspace/drivers/docker/docker-containers";
import { createDockerTestbed, describeDocker } from "./support/docker-env";

describeDocker("Docker file operations through the gateway's file worker, exec as the fallback", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  let ws: DockerWorkspaceHandle;

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    ws = await testbed.open(testbed.newContainers());
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  /**
   * The `docker exec` commands created in the container while `during` runs, from the engine's own event
   * stream. The engine subscribes a little after answering, so the stream starts in the past (`since`) and
   * two marker execs bracket `during`: events of one container arrive in order.
   */
  const execsDuring = async (handle: DockerWorkspaceHandle, during: () => Promise<void>) => {
    const container = handle.backend.container.id;
    const events = (await testbed.docker.getEvents({
      since: Math.floor(Date.now() / 1000) - 2,
      filters: { container: [container], event: ["exec_create"] },
    })) as unknown as Readable;
    const [open, close] = ["open", "close"].map((kind) => `${kind}-${randomBytes(4).toString("hex")}`);
    const actions: string[] = [];
    let recording = false;
    let pending = "";
    const closed = new Promise<void>((resolve, reject) => {
      events.on("error", reject);
      events.on("data", (chunk: Buffer) => {
        pending += chunk.toString("utf8");
        const lines = pending.split("\n");
        pending = lines.pop() ?? "";
        for (const line of lines.filter(Boolean)) {
          const action = (JSON.parse(line) as { Action: string }).Action;
          if (action.includes(open!)) recording = true;
          else if (action.includes(close!)) resolve();
          else if (recording) actions.push(action);
        }
      });
    });
    try {
      await handle.backend.exec(["true", open!]);
      await during();
      await handle.backend.exec(["true", close!]);
      await closed;
    } finally {
      events.destroy();
    }
    return actions;
  };

  it("serves every file operation without a docker exec, with the port's errors, as uid 1000", async () => {
    const { backend } = ws;
    const execs = await execsDuring(ws, async () => {
      await backend.writeFile("gw/a.txt", "one\n", { mode: 0o640 });
      await backend.writeFile("gw/a.txt", "two\n", { append: true });
      expect(await text(await backend.readFile("gw/a.txt"))).toBe("one\ntwo\n");
      expect(await text(await backend.readFile("gw/a.txt", { start: 4, end: 6 }))).toBe("two");
      expect(await backend.stat("gw/a.txt")).toMatchObject({ type: "file", size: 8, mode: 0o640 });
      await backend.mkdir("gw/sub/deeper");
      await backend.writeFile("gw/once.txt", "first", { exclusive: true });
      expect((await backend.list("gw")).map((entry) => [entry.name, entry.type]).sort()).toEqual([
        ["a.txt", "file"],
        ["once.txt", "file"],
        ["sub", "directory"],
      ]);
      await backend.move("gw/a.txt", "gw/moved/b.txt");
      expect(await backend.realpath("gw/moved/../moved/b.txt")).toBe("/workspace/gw/moved/b.txt");
      expect(await backend.realpath("gw/a.txt")).toBeNull();

      await expect(backend.readFile("gw/missing.txt")).rejects.toMatchObject({ code: "NOT_FOUND" });
      await expect(backend.readFile("gw/sub")).rejects.toMatchObject({ code: "BAD_REQUEST" });
      await expect(backend.list("gw/missing")).rejects.toMatchObject({ code: "NOT_FOUND" });
      await expect(backend.list("gw/once.txt")).rejects.toMatchObject({ code: "BAD_REQUEST" });
      await expect(backend.writeFile("gw/once.txt", "again", { exclusive: true })).rejects.toMatchObject({
        code: "CONFLICT",
      });
      await expect(backend.mkdir("gw/once.txt")).rejects.toMatchObject({ code: "CONFLICT" });
      await expect(backend.move("gw/missing", "gw/x")).rejects.toMatchObject({ code: "NOT_FOUND" });
      // The worker has the workspace user's permissions, not the gateway's root.
      await expect(backend.readFile("/etc/shadow")).rejects.toMatchObject({ code: "FORBIDDEN" });
      await expect(backend.writeFile("/opt/berth/berth-gateway.cjs", "x")).rejects.toMatchObject({
        code: "FORBIDDEN",
      });
      expect(await backend.stat("gw/missing")).toBeNull();
      await backend.remove("gw/moved");
      await backend.remove("gw/moved");
    });
    expect(execs).toEqual([]);
    expect(await fs.readFile(path.join(ws.hostWorkdir, "gw/once.txt"), "utf8")).toBe("first");
    const owner = await fs.stat(path.join(ws.hostWorkdir, "gw/once.txt"));
    expect([owner.uid, owner.gid]).toEqual([1000, 1000]);
    expect((await fs.stat(path.join(ws.hostWorkdir, "gw/sub/deeper"))).uid).toBe(1000);
  });

  it("the file worker runs as the workspace user without the token, and comes back after the agent kills it", async () => {
    const workerPid = async () => {
      const ps = await ws.backend.exec(["ps", "-eo", "user:12,pid,args"]);
      const line = ps.stdout
        .toString()
        .split("\n")
        .find((row) => row.includes("berth-gateway.cjs") && row.startsWith("berth"));
      return line?.trim().split(/\s+/)[1];
    };
    const pid = await workerPid();
    expect(pid).toMatch(/^\d+$/);
    const environ = await ws.backend.exec(["cat", `/proc/${pid}/environ`]);
    expect(environ.exitCode).toBe(0);
    expect(environ.stdout.toString()).not.toContain("BERTH_GATEWAY_TOKEN");
    expect(environ.stdout.toString()).toContain("BERTH_GATEWAY_ROLE=files");

    expect((await ws.backend.exec(["kill", "-9", pid!])).exitCode).toBe(0);
    const execs = await execsDuring(ws, async () => {
      await ws.backend.writeFile("respawn.txt", "after the kill");
      expect(await text(await ws.backend.readFile("respawn.txt"))).toBe("after the kill");
    });
    expect(execs).toEqual([]);
    expect(await workerPid()).not.toBe(pid);
  });

  it("an API process attaching to the running gateway (token reused) gets the file endpoints too", async () => {
    const attached = await testbed
      .newContainers()
      .open({ ...ws.ref, agentId: "agent-test", reuseToken: true });
    expect(attached.gateway.instanceNonce).toBe(ws.gateway.instanceNonce);
    expect(attached.gateway.files).not.toBeNull();
    const execs = await execsDuring(attached, async () => {
      await attached.backend.writeFile("attached.txt", "attached");
      expect(await text(await attached.backend.readFile("attached.txt"))).toBe("attached");
    });
    expect(execs).toEqual([]);
  });

  it("falls back to exec when the token was rotated by another process, and when the gateway is down", async () => {
    // Another process opens the same workspace without reusing the token: the gateway restarts.
    const other = await testbed.open(testbed.newContainers(), ws.ref);
    await other.gateway.ready;
    expect(other.gateway.instanceNonce).not.toBe(ws.gateway.instanceNonce);
    const askedGateway = vi.spyOn(ws.gateway.files, "readFile");
    const rotated = await execsDuring(ws, async () => {
      await ws.backend.writeFile("fallback/rotated.txt", "via exec");
      expect(await text(await ws.backend.readFile("fallback/rotated.txt"))).toBe("via exec");
      await expect(ws.backend.readFile("fallback/missing")).rejects.toMatchObject({ code: "NOT_FOUND" });
    });
    expect(rotated.length).toBeGreaterThanOrEqual(3);
    // The first refusal (the write's) was enough: later operations go straight to exec.
    expect(askedGateway).not.toHaveBeenCalled();
    askedGateway.mockRestore();
    // The process holding the current token still goes through the gateway.
    expect(await execsDuring(other, async () => void (await other.backend.stat("fallback")))).toEqual([]);

    const killed = await runRootChore(other.backend.container, [
      "/bin/sh",
      "-c",
      "kill -KILL $(cat /run/berth/gateway.pid)",
    ]);
    expect(killed.exitCode).toBe(0);
    const down = await execsDuring(other, async () => {
      await other.backend.writeFile("fallback/down.txt", "gateway down", { exclusive: true });
      expect(await other.backend.stat("fallback/down.txt")).toMatchObject({ type: "file", size: 12 });
      await expect(
        other.backend.writeFile("fallback/down.txt", "x", { exclusive: true }),
      ).rejects.toMatchObject({
        code: "CONFLICT",
      });
      expect((await other.backend.list("fallback")).map((entry) => entry.name).sort()).toEqual([
        "down.txt",
        "rotated.txt",
      ]);
    });
    expect(down.length).toBeGreaterThanOrEqual(4);
    expect(await fs.readFile(path.join(ws.hostWorkdir, "fallback/down.txt"), "utf8")).toBe("gateway down");
  });
});

async function text(stream: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts).toString("utf8");
}
