import { spawn, type ChildProcess } from "node:child_process";
import { PassThrough, type Writable } from "node:stream";
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { JSONRPCMessageSchema, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { lineSplitter } from "@/server/shared/line-splitter";

/** How a server process ended: its exit code, or the signal that ended it. */
export type StdioExit = { code: number | null; signal: NodeJS.Signals | null };

export type StdioServer = {
  command: string;
  args: string[];
  /** Added to the SDK's default environment (HOME, LOGNAME, PATH, SHELL, TERM, USER). */
  env?: Record<string, string>;
  cwd?: string;
};

/** A line longer than this (no newline yet) is a broken server: the transport closes, as the SDK's does. */
const MAX_LINE_BYTES = 10 * 1024 * 1024;
/** How long close() waits at each step (stdin closed, then SIGTERM) before the next, as the SDK does. */
const CLOSE_STEP_MS = 2_000;

export type StdioTransportOptions = {
  /** close()'s wait at each step (default CLOSE_STEP_MS, the SDK's); tests of the ladder shorten it. */
  closeStepMs?: number;
};

/**
 * An MCP stdio client transport: the SDK's StdioClientTransport (1.32) on Linux, plus `intercept`, which
 * sees each message before the schema check. The SDK's transport checks every line against
 * JSONRPCMessageSchema before anyone sees it; the gateway's ToolCallRelay takes the answers to its own calls
 * from `intercept` and checks their shape itself, so a relayed call skips that parse (about 25 µs of a call
 * in the sandbox). Every other message is checked as the SDK checks it.
 */
export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Called with each parsed line first; true means it was handled and goes no further. */
  intercept?: (message: unknown) => boolean;
  /** The server's stderr, readable before start (what it printed while failing to start included). */
  readonly stderr = new PassThrough();
  private child: ChildProcess | undefined;
  /** The process spawned, kept after close() let go of `child`, until it ended. */
  private running: ChildProcess | undefined;
  private drain: Promise<void> | null = null;
  /** Set once the process ended and its stdio closed (stderr read to the end), whoever ended it. */
  private ended: (StdioExit & { afterClose: boolean }) | null = null;
  /** Set by close(): it ended a live stdin (a server may then exit 0), and whether a signal followed. */
  private closing = false;
  private signalled = false;
  private readonly endWaiters = new Set<() => void>();

  constructor(
    private readonly server: StdioServer,
    private readonly options: StdioTransportOptions = {},
  ) {}

  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  start(): Promise<void> {
    if (this.child) throw new Error("StdioTransport already started");
    return new Promise((resolve, reject) => {
      const env: Record<string, string> = { ...getDefaultEnvironment(), ...this.server.env };
      const child = spawn(this.server.command, this.server.args, {
        env: env as NodeJS.ProcessEnv,
        stdio: ["pipe", "pipe", "pipe"],
        shell: false,
        ...(this.server.cwd ? { cwd: this.server.cwd } : {}),
      });
      this.child = child;
      let spawned = false;
      child.on("error", (error) => {
        // A failed spawn (no such command) gets no 'close': the transport is not started.
        if (!spawned && this.child === child) this.child = undefined;
        reject(error);
        this.onerror?.(error);
      });
      child.on("spawn", () => {
        spawned = true;
        this.running = child;
        resolve();
      });
      child.on("close", (code, signal) => {
        if (this.child === child) this.child = undefined;
        this.ended = { code, signal, afterClose: this.closing };
        this.running = undefined;
        for (const wake of this.endWaiters) wake();
        this.onclose?.();
      });
      child.stdin?.on("error", (error) => this.onerror?.(error));
      const split = lineSplitter((line) => this.deliver(line.toString("utf8")), MAX_LINE_BYTES);
      child.stdout?.on("data", (chunk: Buffer) => {
        if (split(chunk)) return;
        this.onerror?.(new Error(`a message from the MCP server exceeds ${MAX_LINE_BYTES} bytes`));
        child.stdout?.removeAllListeners("data");
        this.close().catch(() => undefined);
      });
      child.stdout?.on("error", (error) => this.onerror?.(error));
      child.stderr?.pipe(this.stderr);
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.child?.stdin;
      if (!stdin?.writable) {
        reject(new Error("Not connected"));
        return;
      }
      if (stdin.write(`${JSON.stringify(message)}\n`)) resolve();
      else this.drained(stdin).then(resolve, reject);
    });
  }

  /**
   * One wait for the server to catch up, shared by every send made meanwhile (not a listener each); the
   * sends fail when the server's stdin closes first.
   */
  private drained(stdin: Writable): Promise<void> {
    this.drain ??= new Promise<void>((resolve, reject) => {
      const settle = (error?: Error) => {
        stdin.off("drain", onDrain);
        stdin.off("close", onClose);
        this.drain = null;
        if (error) reject(error);
        else resolve();
      };
      const onDrain = () => settle();
      const onClose = () => settle(new Error("Not connected"));
      stdin.once("drain", onDrain);
      stdin.once("close", onClose);
    });
    return this.drain;
  }

  /**
   * How the server ended on its own, waiting up to `waitMs` for an end that is under way; null while it
   * runs, or when the end was ours (a signal from close(), or exit 0 after close() ended its stdin). The
   * SDK client closes the transport itself when a handshake fails, so close() having begun is not enough.
   * Once it resolves non-null the server's stderr has been read to the end.
   */
  async exitedOnItsOwn(waitMs: number): Promise<StdioExit | null> {
    if (!this.ended && this.running) {
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.endWaiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, waitMs);
        timer.unref();
        this.endWaiters.add(wake);
      });
    }
    const ended = this.ended;
    if (!ended || this.signalled || (ended.afterClose && ended.code === 0)) return null;
    // stderr reaches `this.stderr` through a pipe: let its last chunk through before anyone reads the tail.
    await new Promise((resolve) => setImmediate(resolve));
    return { code: ended.code, signal: ended.signal };
  }

  /** Ends stdin, then SIGTERM, then SIGKILL, each after the previous step had 2 s (closeStepMs) to end it. */
  async close(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child) return;
    // Ending stdin asks the server to leave, so an exit 0 after it is ours; a stdin already gone (the
    // server died or closed it) asks nothing.
    if (child.stdin?.writable) this.closing = true;
    const stepMs = this.options.closeStepMs ?? CLOSE_STEP_MS;
    const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
    const step = () => Promise.race([closed, new Promise((resolve) => setTimeout(resolve, stepMs).unref())]);
    try {
      child.stdin?.end();
    } catch {
      // already gone
    }
    await step();
    if (child.exitCode === null && child.signalCode === null) {
      this.signalled = true;
      child.kill("SIGTERM");
      await step();
    }
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }

  /** One line: a bad one is reported to onerror and skipped, as the SDK does. */
  private deliver(line: string): void {
    try {
      const json: unknown = JSON.parse(line.endsWith("\r") ? line.slice(0, -1) : line);
      if (this.intercept?.(json)) return;
      this.onmessage?.(JSONRPCMessageSchema.parse(json));
    } catch (error) {
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
    }
  }
}
