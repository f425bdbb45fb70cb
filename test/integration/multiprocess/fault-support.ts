import fs from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import type { Redis } from "ioredis";
import type { FakeTurn, RecordedRequest } from "@/test/fixtures/fake-model/script";

/**
 * Pieces of the multi-process fault tests: a TCP balancer in front of the API processes (what a load
 * balancer does when a replica dies: new connections go to one that accepts), a TCP relay to Postgres that
 * can be cut (a database outage for one process only), the scripted model, and a Redis wipe limited to one
 * installation's prefix (Redis losing its data, without touching anyone else's keys).
 */

export type Relay = {
  port: number;
  cut(): void;
  restore(): void;
  /** Connections refused while cut (a process trying to reach the target). */
  refused(): number;
  /** Open connections stop carrying bytes but stay open (a half-open connection); new ones work. */
  freeze(): void;
  close(): Promise<void>;
};

/** Relays every connection on a loopback port to the first of `targets()` that accepts it. */
export async function startRelay(targets: () => net.NetConnectOpts[]): Promise<Relay> {
  const sockets = new Set<net.Socket>();
  let open = true;
  let refused = 0;
  const pairs = new Set<[net.Socket, net.Socket]>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    if (!open) {
      refused += 1;
      return void client.destroy();
    }
    const candidates = [...targets()];
    const tryNext = () => {
      const target = candidates.shift();
      if (!target) return void client.destroy();
      const upstream = net.connect(target);
      upstream.once("error", () => {
        if (upstream.bytesRead === 0 && upstream.bytesWritten === 0) tryNext();
        else client.destroy();
      });
      upstream.once("connect", () => {
        sockets.add(upstream);
        upstream.on("close", () => {
          sockets.delete(upstream);
          client.destroy();
        });
        client.on("close", () => upstream.destroy());
        const pair: [net.Socket, net.Socket] = [client, upstream];
        pairs.add(pair);
        upstream.on("close", () => pairs.delete(pair));
        client.pipe(upstream);
        upstream.pipe(client);
      });
    };
    tryNext();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    /** Every open connection reset, every new one refused-then-closed: the target is "down". */
    cut() {
      open = false;
      for (const socket of sockets) socket.destroy();
    },
    restore() {
      open = true;
    },
    refused: () => refused,
    freeze() {
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
      pairs.clear();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Deletes every key of the installation's Redis prefix (BullMQ's, the heartbeats, the cancel channels). */
export async function wipeRedisPrefix(redis: Redis, prefix: string): Promise<number> {
  let deleted = 0;
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) deleted += await redis.del(...keys);
  } while (cursor !== "0");
  return deleted;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part: { text?: unknown }) => (typeof part.text === "string" ? part.text : "")).join("");
}

/**
 * The model: "slow <tag>" → a Bash call that appends a line to runs-<tag>.log (the side effect that must
 * happen once) and then waits until release-<tag> exists in the workspace (at most 120 s); its result →
 * "finished <tag>". "team <tag>": the same Bash, then an AgentCreate call (a tool that needs the database),
 * then the answer. "once <tag>": only the Bash side effect, then the answer. "quick <tag>" → a text answer.
 */
export function scriptedModel(request: RecordedRequest): FakeTurn | undefined {
  const last = request.messages.at(-1);
  const lastUser = [...request.messages].reverse().find((message) => message.role === "user");
  const toolResults = request.messages
    .slice(request.messages.lastIndexOf(lastUser!))
    .filter((m) => m.role === "tool");
  const [kind, tag] = textOf(lastUser?.content).split(" ");
  if (!tag) return undefined;
  if (last?.role === "tool") {
    if (kind === "team" && toolResults.length === 1) {
      const args = { name: `member-${tag}`, description: "helps", prompt: "say hi" };
      return { kind: "tool-calls", calls: [{ name: "AgentCreate", arguments: args }] };
    }
    return { kind: "text", text: `finished ${tag}` };
  }
  if (last?.role !== "user") return undefined;
  if (kind === "quick") return { kind: "text", text: `quick answer ${tag}` };
  if (kind === "once") {
    return {
      kind: "tool-calls",
      calls: [{ name: "Bash", arguments: { command: `echo ran >> runs-${tag}.log` } }],
    };
  }
  if (kind !== "slow" && kind !== "team") return undefined;
  const command =
    `echo ran >> runs-${tag}.log; for i in $(seq 1 1200); do [ -f release-${tag} ] && break; sleep 0.1; done; ` +
    `echo released`;
  return { kind: "tool-calls", calls: [{ name: "Bash", arguments: { command } }] };
}

/** The lines the turn's Bash side effect wrote (0 when it never ran). */
export async function runsOf(workdir: string, tag: string): Promise<number> {
  const text = await fs.readFile(path.join(workdir, `runs-${tag}.log`), "utf8").catch(() => "");
  return text.split("\n").filter(Boolean).length;
}

export async function release(workdir: string, tag: string): Promise<void> {
  await fs.writeFile(path.join(workdir, `release-${tag}`), "");
}
