import http from "node:http";
import { describeDocker, dockerSkipReason } from "../../docker/support/docker-env";
import {
  startE2bEmulator,
  type E2bEmulator,
  type E2bEmulatorOptions,
} from "../../../fixtures/e2b-emulator/e2b-emulator";

/**
 * The E2B suites need what the Docker suites need (the emulator's sandboxes are containers of
 * berth-base:bookworm): run when the engine and image are there, FAIL in CI when they are not (the probe in
 * docker-env.ts throws), skip with the reason printed elsewhere.
 */
export const describeE2b = describeDocker;
export const e2bSkipReason = dockerSkipReason;

export async function withEmulator(options: E2bEmulatorOptions = {}): Promise<E2bEmulator> {
  return startE2bEmulator(options);
}

/** A plain HTTP request to the emulator with an explicit Host (how a `getHost(port)` name reaches it). */
export function requestViaHost(
  emulator: E2bEmulator,
  host: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  const url = new URL(emulator.url);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: url.hostname,
      port: Number(url.port),
      path,
      method: "GET",
      headers: { ...headers, host },
      agent: false,
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  options: { timeoutMs?: number; what: string },
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  let delay = 25;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what}`);
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 250);
  }
}
