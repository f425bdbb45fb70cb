import type { Readable } from "node:stream";
import { expect } from "vitest";
import type { PtyProcess } from "@/server/workspace/drivers/port";
import type { ContractContext } from "../backend-contract";

/** Collects a terminal's output and waits (bounded) until it shows what a case expects. */
function watch(output: Readable) {
  let seen = "";
  const waiters = new Set<() => void>();
  output.on("data", (chunk: Buffer) => {
    seen += chunk.toString("utf8");
    for (const wake of waiters) wake();
  });
  return {
    text: () => seen,
    async until(pattern: RegExp, timeoutMs = 15_000): Promise<RegExpMatchArray> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const match = seen.match(pattern);
        if (match) return match;
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`terminal never showed ${pattern}; it showed:\n${seen}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, left);
          function done() {
            clearTimeout(timer);
            waiters.delete(done);
            resolve();
          }
          waiters.add(done);
        });
      }
    },
  };
}

/** pty: a terminal where `capabilities.pty` says there is one (echo, resize seen by `stty size`, exit, kill). */
export function registerPtyCases(context: ContractContext): void {
  context.it("pty: openPty exists exactly when capabilities.pty says so", () => {
    expect(typeof context.backend.openPty === "function").toBe(context.driver.capabilities.pty);
    return Promise.resolve();
  });

  const withPty = async (run: (pty: PtyProcess) => Promise<void>) => {
    if (!context.driver.capabilities.pty) return;
    const pty = await context.backend.openPty!({ cols: 80, rows: 24 });
    try {
      await run(pty);
    } finally {
      await pty.kill();
    }
  };

  context.it("pty: a shell echoes, sees its size and each resize, and exits with its code", () =>
    withPty(async (pty) => {
      const out = watch(pty.output);
      pty.write("stty size; echo at:$(pwd)\n");
      // The shell echoes what was typed: match only what the commands print.
      await out.until(/^24 80\r?$/m);
      expect((await out.until(/^at:(\/\S*)\r?$/m))[1]).toBe(context.backend.workdir);
      await pty.resize(132, 41);
      // A resize travels beside the input (Kubernetes' resize channel): ask again until the shell sees it.
      for (let attempt = 1; ; attempt++) {
        pty.write(`echo try-${attempt}; stty size\n`);
        const [, size] = await out.until(new RegExp(`^try-${attempt}\\r?\\n(\\d+ \\d+)\\r?$`, "m"));
        if (size === "41 132") break;
        if (attempt === 20) throw new Error(`the shell never saw the resize: ${size}`);
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
      pty.write("echo pty-$((6*7))\n");
      await out.until(/^pty-42\r?$/m);
      const ended = new Promise<void>((resolve) => pty.output.once("end", resolve));
      pty.write("exit 5\n");
      expect(await pty.exited).toEqual({ exitCode: 5 });
      await ended;
    }),
  );

  context.it("pty: kill ends a terminal whose shell is busy, and a size out of bounds is refused", () =>
    withPty(async (pty) => {
      const out = watch(pty.output);
      pty.write("echo busy; sleep 600\n");
      await out.until(/^busy\r?$/m);
      await expect(pty.resize(0, 24)).rejects.toMatchObject({ code: "BAD_REQUEST" });
      await pty.kill();
      expect((await pty.exited).exitCode).toBe(-1);
    }),
  );
}
