/**
 * The terminal relay's protocol on a real Redis (server/modules/terminal/terminal-relay.ts), two relays
 * in one process standing for two replicas: the owner's replay and output reach the relay in order, a
 * burst past the ack window pauses the shell's output until the relay's acks come back, the relay's
 * keystrokes and goodbye reach the owner, and an owner that refuses (or is not subscribed) is a 404.
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { loadRedisConfig } from "@/server/config/redis";
import {
  createTerminalRelay,
  type RelayedHandle,
  type RelaySink,
  type TerminalRelay,
} from "@/server/modules/terminal/terminal-relay";
import { createRedisConnection } from "@/server/redis";

const config = loadRedisConfig();
const connections: ReturnType<typeof createRedisConnection>[] = [];
const relays: TerminalRelay[] = [];

afterEach(async () => {
  await Promise.all(relays.splice(0).map((relay) => relay.close()));
  await Promise.all(connections.splice(0).map((redis) => redis.quit().catch(() => redis.disconnect())));
});

describe("the terminal relay", () => {
  it("relays output with flow control, keystrokes and the goodbye between two processes", async () => {
    const prefixShared = `${config.prefix}-relay-${randomUUID().slice(0, 8)}`;
    const make = (processId: string) => {
      const redis = createRedisConnection(config, "producer");
      connections.push(redis);
      const relay = createTerminalRelay({
        redis,
        subscriber: () => {
          const subscriber = createRedisConnection(config, "producer");
          connections.push(subscriber);
          return subscriber;
        },
        prefix: prefixShared,
        processId,
        windowBytes: 64 * 1024,
      });
      relays.push(relay);
      return relay;
    };
    const owner = make("owner");
    const other = make("other");
    const caller = { tenantId: "t1", userId: "u1", apiKeyId: null };
    const events: string[] = [];
    let ownerSink: RelaySink | null = null;
    const handle: RelayedHandle = {
      write: (data) => events.push(`write:${data}`),
      resize: (cols, rows) => Promise.resolve(void events.push(`resize:${cols}x${rows}`)),
      detach: () => void events.push("detach"),
      close: (reason) => Promise.resolve(void events.push(`close:${reason}`)),
      pause: () => void events.push("pause"),
      resume: () => void events.push("resume"),
    };
    owner.serve((request, sink) => {
      if (request.caller.userId !== "u1") throw new Error("not the caller's");
      ownerSink = sink;
      sink.output(Buffer.from("replay|"));
      return handle;
    });
    await owner.register("term-1", { ...caller, workspaceId: "ws-1" }, 60_000);
    const entry = await other.lookup("term-1");
    expect(entry).toEqual({ ...caller, workspaceId: "ws-1", owner: "owner" });

    let received = "";
    let exited!: (code: number) => void;
    const exit = new Promise<number>((resolve) => (exited = resolve));
    const sink: RelaySink = { output: (chunk) => (received += chunk.toString()), exit: exited };
    const relayed = await other.attach(entry!, { terminalId: "term-1", workspaceId: "ws-1", caller }, sink);
    relayed.write("ls\r");
    await relayed.resize(100, 30);
    // A burst past the 64 KiB window, written before any ack can come back: the owner pauses the shell,
    // and the relay's acks let it go on.
    for (let i = 0; i < 8; i++) ownerSink!.output(Buffer.from("x".repeat(16 * 1024)));
    expect(events).toContain("pause");
    await expect.poll(() => events.includes("resume")).toBe(true);
    // The owner resumes once acks free the window, which can be before the last chunks reach this sink.
    await expect.poll(() => received.length).toBe("replay|".length + 128 * 1024);
    expect(received).toBe(`replay|${"x".repeat(128 * 1024)}`);
    // Keystrokes travel through Redis; the pause happened at once, in the owner.
    await expect
      .poll(() => events.filter((event) => !/^(pause|resume)$/.test(event)))
      .toEqual(["write:ls\r", "resize:100x30"]);
    expect(events.filter((event) => /^(pause|resume)$/.test(event))).toEqual(["pause", "resume"]);
    ownerSink!.exit(0);
    expect(await exit).toBe(0);

    // Another caller is refused by the owner, and a process nobody subscribes for answers nobody: 404s.
    const stranger = { ...caller, userId: "u2" };
    await expect(
      other.attach(
        entry!,
        { terminalId: "term-1", workspaceId: "ws-1", caller: stranger },
        {
          output: () => undefined,
          exit: () => undefined,
        },
      ),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(
      other.attach(
        { ...entry!, owner: "gone" },
        { terminalId: "term-1", workspaceId: "ws-1", caller },
        {
          output: () => undefined,
          exit: () => undefined,
        },
      ),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
    await owner.unregister("term-1");
    expect(await other.lookup("term-1")).toBeNull();
  });
});
