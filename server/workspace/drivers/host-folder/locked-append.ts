import { spawn } from "node:child_process";
import type fs from "node:fs/promises";
import { Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";

/**
 * How long an append waits for another writer's lock before failing. A holder that died released its lock
 * with its last descriptor, so only a live writer that stalls (a stream that stopped sending) is waited for.
 */
const APPEND_LOCK_WAIT_SECONDS = 60;

/**
 * Appends `data` to the open file (opened with O_APPEND) while holding an exclusive flock(2) on it, so one
 * call's bytes land contiguously at ANY size, across processes: O_APPEND alone only keeps one write(2)
 * whole, and Node splits a buffer over 512 KiB, and any stream, into several writes. Every appender of a
 * backend takes the same lock: the exec scripts (`flock -x 9` on their `>>` descriptor) and the gateway's
 * file endpoint call this too.
 *
 * Node has no flock binding, so util-linux `flock` takes it on the file description we pass as its fd 3;
 * the lock belongs to that description, outlives the helper and ends when the handle closes (or the
 * process dies: no stale lock is ever left behind).
 */
export async function appendUnderLock(
  handle: fs.FileHandle,
  data: Readable | Uint8Array | string,
  target: string,
): Promise<void> {
  await lockExclusive(handle, target);
  if (data instanceof Readable) {
    for await (const chunk of data as AsyncIterable<Buffer | string>) {
      await writeAll(handle, typeof chunk === "string" ? Buffer.from(chunk) : chunk);
    }
    return;
  }
  await writeAll(handle, typeof data === "string" ? Buffer.from(data) : data);
}

async function writeAll(handle: fs.FileHandle, buffer: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, offset, buffer.length - offset);
    offset += bytesWritten;
  }
}

function lockExclusive(handle: fs.FileHandle, target: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("flock", ["-x", "-w", String(APPEND_LOCK_WAIT_SECONDS), "3"], {
      stdio: ["ignore", "ignore", "pipe", handle.fd],
    });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        new AppError(
          "INTERNAL",
          error.code === "ENOENT"
            ? "appending needs util-linux flock, which is not installed"
            : `could not lock ${target} for an append: ${error.message}`,
          { cause: error, details: { path: target } },
        ),
      ),
    );
    child.once("close", (code) => {
      if (code === 0) return resolve();
      // flock -w exits 1 when the wait ran out.
      reject(
        new AppError(
          code === 1 ? "TIMEOUT" : "INTERNAL",
          `could not lock ${target} for an append (flock exit ${code}): ${stderr.trim().slice(0, 300)}`,
          { details: { path: target } },
        ),
      );
    });
  });
}
