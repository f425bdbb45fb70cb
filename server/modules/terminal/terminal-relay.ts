import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { z } from "zod";
import { onChannelMessage, publishMessage, subscribeChannel } from "@/server/redis";
import { AppError } from "@/server/shared/errors";

/**
 * Terminals across API replicas, without sticky sessions. A shell lives in the process that opened it
 * (its PTY is a child of that process, or a stream it holds to dockerd, a Pod or a sandbox, none of
 * which can be handed to another process), so a reattach that lands on another replica is relayed to
 * the owner over Redis, which every replica already shares (no replica-to-replica network, port or
 * secret to configure):
 *
 * - The directory: `<prefix>:terminal:<id>` names the owner process and whose terminal it is, written
 *   when the shell starts, refreshed with its lease, deleted when it ends (a crashed owner's entry expires).
 * - One pub/sub channel per process, `<prefix>:terminal:process:<id>`, subscribed on first use. A relay
 *   (the replica holding the WebSocket) sends `attach`, then keystrokes, resizes, acks and its goodbye;
 *   the owner binds the terminal to a sink that publishes output, the exit and a takeover back.
 * - Pub/sub loses what a disconnected subscriber misses, so every message of an attachment carries a
 *   sequence number: a gap, a PUBLISH nobody received, or a peer silent for three keepalives ends the
 *   attachment as a dropped connection (the owner keeps the shell for its reattach grace; the relay closes
 *   the WebSocket with 1011, and the browser reattaches and gets the recent output replayed).
 * - Flow control: the owner pauses the shell's output once `windowBytes` are unacknowledged, so a
 *   `yes` in a relayed terminal fills the PTY, not Redis' pub/sub output buffers.
 */
export type TerminalCaller = { tenantId: string; userId: string | null; apiKeyId: string | null };
export type TerminalDirectoryEntry = TerminalCaller & { owner: string; workspaceId: string };

/** What the owner's side of an attachment drives: the terminal service's handle of that connection. */
export type RelayedHandle = {
  write(data: string): void;
  resize(cols: number, rows: number): Promise<void>;
  detach(): void;
  close(reason: string): Promise<void>;
  /** Holds the shell's output back (flow control); `resume` lets it flow again. */
  pause(): void;
  resume(): void;
};

/** What a relay's connection receives (the WebSocket's sink). */
export type RelaySink = {
  output(chunk: Buffer): void;
  exit(exitCode: number): void;
  superseded?(): void;
  /** The relay broke (owner gone or silent, a lost message): the client should reattach. */
  interrupted?(): void;
};

export type AttachRequest = { terminalId: string; workspaceId: string; caller: TerminalCaller };
/** The owner's terminal service: binds its terminal to `sink` (with the replay first), or throws. */
export type AttachHandler = (request: AttachRequest, sink: RelaySink) => RelayedHandle;

export type TerminalRelayOptions = {
  /** Commands (GET/SET/PUBLISH): the process' shared connection. */
  redis: Redis;
  /** A dedicated connection for SUBSCRIBE, created on first use (processes without terminals open none). */
  subscriber: () => Redis;
  prefix: string;
  /** This process' id (its holder id). */
  processId: string;
  keepaliveMs?: number;
  attachTimeoutMs?: number;
  windowBytes?: number;
};

const ZCaller = z.object({
  tenantId: z.string(),
  userId: z.string().nullable(),
  apiKeyId: z.string().nullable(),
});
const ZEntry = ZCaller.extend({ owner: z.string(), workspaceId: z.string() });
const ZMessage = z.intersection(
  z.object({ a: z.string(), s: z.number().int() }),
  z.discriminatedUnion("k", [
    // relay → owner
    z.object({
      k: z.literal("attach"),
      from: z.string(),
      terminalId: z.string(),
      workspaceId: z.string(),
      caller: ZCaller,
    }),
    z.object({ k: z.literal("in"), d: z.string() }),
    z.object({ k: z.literal("resize"), cols: z.number().int(), rows: z.number().int() }),
    z.object({ k: z.literal("ack"), n: z.number() }),
    z.object({ k: z.literal("detach") }),
    z.object({ k: z.literal("close") }),
    // owner → relay
    z.object({ k: z.literal("ready") }),
    z.object({ k: z.literal("refused"), message: z.string() }),
    z.object({ k: z.literal("out"), d: z.string() }),
    z.object({ k: z.literal("exit"), code: z.number() }),
    z.object({ k: z.literal("superseded") }),
    z.object({ k: z.literal("gone") }),
    // both
    z.object({ k: z.literal("ping") }),
  ]),
);
type Message = z.infer<typeof ZMessage>;
type Outgoing = Message extends infer M ? (M extends unknown ? Omit<M, "a" | "s"> : never) : never;

/** One end of an attachment: the peer's process, both sequence counters, when the peer was last heard. */
type Link = {
  id: string;
  peer: string;
  sent: number;
  heard: number;
  heardAt: number;
  timer: NodeJS.Timeout | null;
  onMessage(message: Message): void;
  /** The link broke (gap, silence, nobody subscribed): end it as a dropped connection. */
  onLost(): void;
};

const notOpen = (terminalId: string) =>
  new AppError("NOT_FOUND", `terminal ${terminalId} is not open`, {
    userMessage: "That terminal has ended; open a new one.",
  });

export function createTerminalRelay(options: TerminalRelayOptions) {
  const keepaliveMs = options.keepaliveMs ?? 5_000;
  const attachTimeoutMs = options.attachTimeoutMs ?? 5_000;
  const windowBytes = options.windowBytes ?? 1024 * 1024;
  const links = new Map<string, Link>();
  const channelOf = (processId: string) => `${options.prefix}:terminal:process:${processId}`;
  const entryKey = (terminalId: string) => `${options.prefix}:terminal:${terminalId}`;
  let handler: AttachHandler | null = null;
  let subscriber: Redis | null = null;
  let subscribed: Promise<unknown> | null = null;

  const ensureSubscribed = () => {
    if (!subscribed) {
      const connection = (subscriber = options.subscriber());
      onChannelMessage(connection, (_channel, payload) => receive(payload));
      // A refused SUBSCRIBE (Redis unreachable) is tried again by the next terminal, on a new connection.
      subscribed = subscribeChannel(connection, channelOf(options.processId)).catch((error: unknown) => {
        subscribed = null;
        subscriber = null;
        connection.disconnect();
        throw error;
      });
    }
    return subscribed;
  };

  function receive(payload: Buffer): void {
    let parsed: Message;
    try {
      parsed = ZMessage.parse(JSON.parse(payload.toString("utf8")));
    } catch {
      return;
    }
    if (parsed.k === "attach") return void onAttach(parsed);
    const link = links.get(parsed.a);
    if (!link) return;
    if (parsed.s !== link.heard + 1) return lose(link);
    link.heard = parsed.s;
    link.heardAt = Date.now();
    if (parsed.k !== "ping") link.onMessage(parsed);
  }

  function send(link: Link, message: Outgoing): void {
    const payload = JSON.stringify({ ...message, a: link.id, s: ++link.sent });
    publishMessage(options.redis, channelOf(link.peer), payload).then(
      (receivers) => receivers === 0 && lose(link),
      () => lose(link),
    );
  }

  function drop(link: Link): void {
    if (link.timer) clearInterval(link.timer);
    links.delete(link.id);
  }

  function lose(link: Link): void {
    if (!links.has(link.id)) return;
    drop(link);
    link.onLost();
  }

  /** Registers `link` and its keepalive: a ping every `keepaliveMs`, lost after three silent ones. */
  function track(link: Link): Link {
    links.set(link.id, link);
    link.timer = setInterval(() => {
      if (Date.now() - link.heardAt > 3 * keepaliveMs) return lose(link);
      send(link, { k: "ping" });
    }, keepaliveMs);
    link.timer.unref();
    return link;
  }

  /** The owner's side: an attach request from a relay becomes a binding of the local terminal. */
  function onAttach(request: Extract<Message, { k: "attach" }>): void {
    let handle: RelayedHandle | null = null;
    let unacked = 0;
    let paused = false;
    const link = track({
      id: request.a,
      peer: request.from,
      sent: 0,
      heard: request.s,
      heardAt: Date.now(),
      timer: null,
      onMessage(message) {
        if (!handle) return;
        if (message.k === "in") handle.write(message.d);
        else if (message.k === "resize")
          void handle.resize(message.cols, message.rows).catch(() => undefined);
        else if (message.k === "ack") {
          unacked = Math.max(0, unacked - message.n);
          if (paused && unacked < windowBytes / 2) {
            paused = false;
            handle.resume();
          }
        } else if (message.k === "detach") end(() => handle?.detach());
        else if (message.k === "close") end(() => void handle?.close("closed"));
      },
      onLost: () => {
        handle?.resume();
        handle?.detach();
      },
    });
    const end = (then: () => void) => {
      drop(link);
      handle?.resume();
      then();
    };
    const sink: RelaySink = {
      output(chunk) {
        if (!links.has(link.id)) return;
        send(link, { k: "out", d: chunk.toString("base64") });
        unacked += chunk.length;
        if (!paused && unacked > windowBytes) {
          paused = true;
          handle?.pause();
        }
      },
      exit(code) {
        if (links.has(link.id)) send(link, { k: "exit", code });
        drop(link);
      },
      superseded() {
        if (links.has(link.id)) send(link, { k: "superseded" });
        drop(link);
      },
    };
    try {
      if (!handler) throw notOpen(request.terminalId);
      // The replay goes out (as output) during the binding, before "ready": the relay queues it.
      handle = handler(
        { terminalId: request.terminalId, workspaceId: request.workspaceId, caller: request.caller },
        sink,
      );
      send(link, { k: "ready" });
    } catch (error) {
      send(link, { k: "refused", message: error instanceof Error ? error.message : "refused" });
      drop(link);
    }
  }

  return {
    processId: options.processId,

    /** The owner's terminal service: how it answers relayed attaches. */
    serve(attach: AttachHandler): void {
      handler = attach;
    },

    /** Announces (or refreshes) a terminal this process owns; subscribes first so relays can reach it. */
    async register(terminalId: string, entry: Omit<TerminalDirectoryEntry, "owner">, ttlMs: number) {
      await ensureSubscribed();
      const value: TerminalDirectoryEntry = { ...entry, owner: options.processId };
      await options.redis.set(entryKey(terminalId), JSON.stringify(value), "PX", ttlMs);
    },

    async unregister(terminalId: string): Promise<void> {
      await options.redis.del(entryKey(terminalId));
    },

    async lookup(terminalId: string): Promise<TerminalDirectoryEntry | null> {
      const raw = await options.redis.get(entryKey(terminalId));
      if (!raw) return null;
      const parsed = ZEntry.safeParse(JSON.parse(raw));
      return parsed.success ? parsed.data : null;
    },

    /**
     * The relay's side: attaches `sink` to a terminal another process owns. Resolves once the owner bound
     * it (the replay follows as output); NOT_FOUND when it refuses or does not answer in time.
     */
    async attach(
      entry: TerminalDirectoryEntry,
      request: AttachRequest,
      sink: RelaySink,
    ): Promise<Omit<RelayedHandle, "pause" | "resume">> {
      await ensureSubscribed();
      let received = 0;
      let acked = 0;
      let settle: { resolve: () => void; reject: (error: unknown) => void } | null = null;
      const bound = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
      const link = track({
        id: randomUUID(),
        peer: entry.owner,
        sent: 0,
        heard: 0,
        heardAt: Date.now(),
        timer: null,
        onMessage(message) {
          if (message.k === "ready") return settle?.resolve();
          if (message.k === "refused") {
            drop(link);
            return settle?.reject(notOpen(request.terminalId));
          }
          if (message.k === "out") {
            const chunk = Buffer.from(message.d, "base64");
            sink.output(chunk);
            received += chunk.length;
            // Acknowledged in steps of a sixteenth of the window: few messages, and never a stall.
            if (received - acked >= windowBytes / 16) {
              send(link, { k: "ack", n: received - acked });
              acked = received;
            }
          } else if (message.k === "exit") {
            drop(link);
            sink.exit(message.code);
          } else if (message.k === "superseded") {
            drop(link);
            sink.superseded?.();
          } else if (message.k === "gone") {
            drop(link);
            sink.interrupted?.();
          }
        },
        onLost: () => {
          settle?.reject(notOpen(request.terminalId));
          sink.interrupted?.();
        },
      });
      send(link, { k: "attach", from: options.processId, ...request });
      const timeout = setTimeout(() => lose(link), attachTimeoutMs);
      try {
        await bound;
      } finally {
        clearTimeout(timeout);
        settle = null;
      }
      const live = () => links.has(link.id);
      return {
        write: (data) => void (live() && send(link, { k: "in", d: data })),
        // Fire and forget, like a keystroke: the owner applies it in order with the input.
        resize: (cols, rows) => Promise.resolve(void (live() && send(link, { k: "resize", cols, rows }))),
        detach() {
          if (!live()) return;
          send(link, { k: "detach" });
          drop(link);
        },
        close: () => {
          if (live()) {
            send(link, { k: "close" });
            drop(link);
          }
          return Promise.resolve();
        },
      };
    },

    /**
     * Shutdown: relayed connections are told to reattach (their shells live on elsewhere, so a rolling
     * restart moves them to another replica), owned ones are detached; then the subscriber goes.
     */
    async close(): Promise<void> {
      for (const link of [...links.values()]) {
        // The owner starts the shell's reattach grace now rather than after the keepalives run out.
        send(link, { k: "detach" });
        lose(link);
      }
      const connection = subscriber;
      subscriber = null;
      subscribed = null;
      if (connection) await connection.quit().catch(() => connection.disconnect());
    },
  };
}

export type TerminalRelay = ReturnType<typeof createTerminalRelay>;
