import { PassThrough } from "node:stream";
import type { Sandbox } from "e2b";
import { AppError } from "@/server/shared/errors";
import { assertPtySize } from "@/server/workspace/drivers/pty-size";
import { DEFAULT_PTY_COMMAND, type PtyOptions, type PtyProcess } from "@/server/workspace/drivers/port";
import { toAppError } from "./e2b-errors";

/**
 * An E2B terminal through the SDK's `sandbox.pty` (envd's PTY processes): the template's user in the
 * workdir, resized with `pty.resize` (envd's `Process/Update`), killed with `pty.kill`. The SDK always
 * runs `/bin/bash -i -l` on it, so only the default shell is offered. No envd deadline (`timeoutMs: 0`):
 * the terminal lives until it is killed; `release` lets the sandbox's keepalive go when it ends.
 */
export async function openE2bPty(
  sandbox: Sandbox,
  settings: { user: string; cwd: string; env: Record<string, string>; requestTimeoutMs: number },
  options: PtyOptions,
  release: () => void,
): Promise<PtyProcess> {
  assertPtySize(options.cols, options.rows);
  if (options.command && options.command.join("\0") !== DEFAULT_PTY_COMMAND.join("\0")) {
    release();
    throw new AppError("UNPROCESSABLE", "E2B terminals run the SDK's login shell only", {
      userMessage: "This backend's terminal runs bash only.",
    });
  }
  const output = new PassThrough();
  let ended = false;
  let killed = false;
  let handle;
  try {
    handle = await sandbox.pty.create({
      cols: options.cols,
      rows: options.rows,
      user: settings.user,
      cwd: settings.cwd,
      envs: { TERM: "xterm-256color", ...settings.env, ...options.env },
      timeoutMs: 0,
      requestTimeoutMs: settings.requestTimeoutMs,
      onData: (data) => {
        if (!ended) output.write(Buffer.from(data));
      },
    });
  } catch (error) {
    release();
    throw toAppError(error, "open a terminal in the sandbox", { sandboxId: sandbox.sandboxId });
  }
  const pid = handle.pid;
  const exited = handle.wait().then(
    (result) => ({ exitCode: result.exitCode }),
    (error: unknown) => ({ exitCode: (error as { exitCode?: number }).exitCode ?? -1 }),
  );
  const done = exited.then((result) => {
    ended = true;
    output.end();
    release();
    return killed ? { exitCode: -1 } : result;
  });
  const rpc = { requestTimeoutMs: settings.requestTimeoutMs };
  return {
    output,
    exited: done,
    write(data) {
      if (ended) return;
      const bytes = typeof data === "string" ? Buffer.from(data) : data;
      void sandbox.pty.sendInput(pid, bytes, rpc).catch(() => undefined);
    },
    async resize(cols, rows) {
      assertPtySize(cols, rows);
      if (ended) return;
      await sandbox.pty.resize(pid, { cols, rows }, rpc).catch((error: unknown) => {
        throw toAppError(error, "resize the terminal", { sandboxId: sandbox.sandboxId });
      });
    },
    async kill() {
      if (!ended) {
        killed = true;
        await sandbox.pty.kill(pid, rpc).catch(() => false);
      }
      await done;
    },
  };
}
