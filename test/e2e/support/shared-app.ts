import { get } from "node:http";
import { inject } from "vitest";
import type { SharedE2e } from "@/test/setup/e2e-shared";

/** GET on the control endpoint of test/setup/e2e-shared.ts; node:http, whose request never times out. */
function control(pathname: "/app" | "/output"): Promise<{ status: number; body: string }> {
  const { controlUrl } = inject("e2eShared");
  return new Promise((resolve, reject) => {
    get(`${controlUrl}${pathname}`, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (body += chunk));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body }));
      response.on("error", reject);
    }).on("error", reject);
  });
}

/**
 * The Berth server and Chromium every e2e file shares, started by the first file that asks (the first start
 * of a tree builds Next: minutes). Fails with the server's output when it could not start.
 */
export async function sharedApp(): Promise<SharedE2e> {
  const { status, body } = await control("/app");
  if (status !== 200) throw new Error(`the shared e2e server did not start:\n${body}`);
  return JSON.parse(body) as SharedE2e;
}

/** The shared server's last lines (LOG_LEVEL=warn: its warnings and errors); empty before it serves. */
export async function sharedServerOutput(lastLines = 80): Promise<string> {
  const { body } = await control("/output").catch((error: Error) => ({
    body: `(unreadable: ${error.message})`,
  }));
  return body.split("\n").slice(-lastLines).join("\n");
}
