import { afterEach } from "vitest";
import { runningServersOutput } from "@/test/e2e/support/berth-server";

/**
 * A failing e2e test prints what its server logged: a browser timeout alone says what the page did not
 * show, the server's warnings and errors say why (a job that failed, a request that was refused).
 */
afterEach((context) => {
  if (context.task.result?.state !== "fail") return;
  for (const output of runningServersOutput())
    console.error(`[e2e] ${context.task.name}: server output\n${output}`);
});
