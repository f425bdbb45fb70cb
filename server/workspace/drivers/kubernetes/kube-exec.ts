import { PassThrough, Readable, Writable } from "node:stream";
import * as k8s from "@kubernetes/client-node";
import type WebSocket from "ws";
import { AppError } from "@/server/shared/errors";

/** One container of one Pod. */
export type ExecTarget = { namespace: string; pod: string; container: string };

/** What the status channel said: 0 on Success, the ExitCode cause on NonZeroExitCode; null when it never came. */
type ExecOutcome = { exitCode: number | null; message: string | null };

/** Output sinks: return false to ask for backpressure (the socket is paused until `resume()`). */
export type ExecSinks = { stdout: (chunk: Buffer) => boolean; stderr: (chunk: Buffer) => boolean };

export type ExecChannel = {
  /** The negotiated subprotocol (`v5.channel.k8s.io`, or `v4…` on servers before Kubernetes 1.30). */
  readonly protocol: string;
  /** Sends stdin bytes; resolves once they are queued below the high-water mark (backpressure). */
  write(chunk: Buffer): Promise<void>;
  /** v5 only: half-closes stdin (the CLOSE frame `[255, 0]`), so the process reads EOF. */
  endStdin(): void;
  resume(): void;
  /** `tty` sessions: the terminal's new size on the resize channel (4); the runtime sends SIGWINCH. */
  resize(cols: number, rows: number): void;
  /** Closes the socket. The process is NOT killed by this: a container runtime leaves it running. */
  close(): void;
  /** Resolves when the socket closed, with the status channel's verdict. */
  done: Promise<ExecOutcome>;
};

export const V5_PROTOCOL = "v5.channel.k8s.io";
/** Frames of stdin are cut to this size; the socket is awaited above the high-water mark. */
const FRAME_BYTES = 64 * 1024;
const HIGH_WATER = 1024 * 1024;

/**
 * Opens `pods/exec` over WebSocket through client-node's `Exec` (its auth, TLS and subprotocol offer
 * v5 → v4 …), but drives the channels itself: client-node's own stdin pump reads a stream in flowing mode
 * with no backpressure and cannot half-close a stream it did not end, and its output handler ignores
 * backpressure. Here stdin frames wait for the socket to drain, output pauses the socket when the consumer
 * is full, and the exit code comes from the status channel.
 */
export async function openExec(
  kc: k8s.KubeConfig,
  target: ExecTarget,
  argv: readonly string[],
  /** `tty`: the process gets a terminal (stderr merges into stdout, as on any terminal). */
  options: { stdin: boolean; sinks: ExecSinks; tty?: boolean },
): Promise<ExecChannel> {
  let socket: WebSocket | null = null;
  let pauseRequested = false;
  const pause = () => {
    if (socket) socket.pause();
    else pauseRequested = true;
  };
  const sink = (deliver: (chunk: Buffer) => boolean) =>
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        if (!deliver(chunk)) pause();
        callback();
      },
    });
  // Marks the session as having stdin (client-node derives `stdin=true` from a non-null stream); never
  // written to: frames are sent below, with backpressure.
  const stdinMarker = options.stdin ? new PassThrough() : null;
  let outcome: ExecOutcome = { exitCode: null, message: null };
  let settle: (outcome: ExecOutcome) => void = () => undefined;
  const done = new Promise<ExecOutcome>((resolve) => (settle = resolve));
  const onStatus = (status: k8s.V1Status) => {
    outcome = outcomeOf(status);
    // The verdict is in: a server slow to finish the close handshake must not hold the caller (ws would
    // wait up to 30 s for it), so the socket is dropped after a short grace.
    settle(outcome);
    const lingering = socket;
    if (lingering) setTimeout(() => lingering.terminate(), 1_000).unref();
  };
  try {
    socket = await new k8s.Exec(kc).exec(
      target.namespace,
      target.pod,
      target.container,
      [...argv],
      sink(options.sinks.stdout),
      sink(options.sinks.stderr),
      stdinMarker,
      options.tty ?? false,
      onStatus,
    );
  } catch (error) {
    stdinMarker?.destroy();
    throw new AppError(
      "UNAVAILABLE",
      `exec in ${target.namespace}/${target.pod} (${target.container}) failed: ${socketErrorMessage(error)}`,
      { cause: error, userMessage: "The workspace Pod is not reachable", details: { pod: target.pod } },
    );
  }
  const ws = socket;
  if (pauseRequested) ws.pause();
  ws.on("close", () => {
    stdinMarker?.destroy();
    settle(outcome);
  });
  ws.on("error", () => undefined);
  return {
    protocol: ws.protocol,
    async write(chunk: Buffer) {
      for (let offset = 0; offset < chunk.length; offset += FRAME_BYTES) {
        if (ws.readyState !== ws.OPEN) return;
        const frame = Buffer.concat([Buffer.from([0]), chunk.subarray(offset, offset + FRAME_BYTES)]);
        if (ws.bufferedAmount > HIGH_WATER)
          await new Promise<void>((resolve) => ws.send(frame, () => resolve()));
        else ws.send(frame);
      }
    },
    endStdin() {
      if (ws.protocol !== V5_PROTOCOL)
        throw new AppError("INTERNAL", "stdin cannot be half-closed before v5");
      if (ws.readyState === ws.OPEN) ws.send(Buffer.from([255, 0]));
    },
    resume: () => ws.resume(),
    resize(cols: number, rows: number) {
      if (ws.readyState !== ws.OPEN) return;
      ws.send(Buffer.concat([Buffer.from([4]), Buffer.from(JSON.stringify({ Width: cols, Height: rows }))]));
    },
    close: () => ws.close(),
    done,
  };
}

/** ws reports a failed upgrade as an ErrorEvent (`{ message, error }`), not as an Error. */
function socketErrorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  const event = error as { message?: unknown; error?: unknown } | null;
  if (typeof event?.message === "string") return event.message;
  return event?.error instanceof Error ? event.error.message : "connection failed";
}

function outcomeOf(status: k8s.V1Status): ExecOutcome {
  if (status.status === "Success") return { exitCode: 0, message: null };
  const cause = status.details?.causes?.find((entry) => entry.reason === "ExitCode");
  const code = cause?.message !== undefined ? Number(cause.message) : NaN;
  return { exitCode: Number.isInteger(code) ? code : null, message: status.message ?? status.reason ?? null };
}

/**
 * Before v5 a client cannot half-close stdin, so commands that need EOF read it through this relay (run by
 * the image's Node): stdin arrives as frames `[u32 length][bytes]`, a zero length meaning EOF, and the
 * command gets a plain pipe it sees closing.
 */
export const STDIN_UNFRAMER = [
  "const {spawn}=require('child_process');const a=process.argv.slice(1);",
  "const c=spawn(a[0],a.slice(1),{stdio:['pipe','inherit','inherit']});c.stdin.on('error',()=>{});",
  "c.on('error',e=>{process.stderr.write(String(e)+'\\n');process.exit(127)});",
  "c.on('exit',(code,sig)=>process.exit(code===null?128+9:code));let b=Buffer.alloc(0);",
  "process.stdin.on('data',d=>{b=Buffer.concat([b,d]);while(b.length>=4){const n=b.readUInt32BE(0);",
  "if(n===0){c.stdin.end();process.stdin.destroy();return}if(b.length<4+n)break;",
  "const p=b.subarray(4,4+n);b=b.subarray(4+n);",
  "if(!c.stdin.write(p)){process.stdin.pause();c.stdin.once('drain',()=>process.stdin.resume())}}});",
].join("");

function lengthPrefix(length: number): Buffer {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(length, 0);
  return header;
}

/**
 * Streams `stdin` into an open channel and signals EOF: the CLOSE frame on v5, a zero-length frame for
 * STDIN_UNFRAMER on older servers (`framed`). Stops quietly when the process stopped reading.
 */
export async function feedStdin(
  channel: ExecChannel,
  stdin: Readable | Uint8Array | string,
  framed: boolean,
): Promise<void> {
  const source = stdin instanceof Readable ? stdin : Readable.from([Buffer.from(stdin)]);
  let finished = false;
  void channel.done.then(() => {
    finished = true;
    source.destroy();
  });
  try {
    for await (const chunk of source as AsyncIterable<Buffer | string>) {
      if (finished) return;
      const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      if (bytes.length === 0) continue;
      await channel.write(framed ? Buffer.concat([lengthPrefix(bytes.length), bytes]) : bytes);
    }
  } catch (error) {
    if (finished) return;
    // A failing source must not look like a complete one: drop the session instead of sending EOF.
    channel.close();
    throw error;
  }
  if (finished) return;
  if (framed) await channel.write(lengthPrefix(0));
  else channel.endStdin();
}
