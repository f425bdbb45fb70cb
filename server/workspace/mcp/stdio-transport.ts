import { spawn, type ChildProcess } from "node:child_process";
import { PassThrough, type Writable } from "node:stream";
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { JSONRPCMessageSchema, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { lineSplitter } from "@/server/shared/line-splitter";

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
  private drain: Promise<void> | null = null;

  constructor(private readonly server: StdioServer) {}

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
        resolve();
      });
      child.on("close", () => {
        if (this.child === child) this.child = undefined;
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

  /** Ends stdin, then SIGTERM, then SIGKILL, each after the previous step had 2 s to end the server. */
  async close(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child) return;
    const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
    const step = () =>
      Promise.race([closed, new Promise((resolve) => setTimeout(resolve, CLOSE_STEP_MS).unref())]);
    try {
      child.stdin?.end();
    } catch {
      // already gone
    }
    await step();
    if (child.exitCode === null && child.signalCode === null) {
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
