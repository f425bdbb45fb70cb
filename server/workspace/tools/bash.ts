import { z } from "zod";
import { defineTool, type BuiltinTool, type ToolContext } from "./types";
import { normalizeNewlines, truncateOutput } from "./text";

const BASH_DEFAULT_TIMEOUT_MS = 120_000;
const BASH_MAX_TIMEOUT_MS = 600_000;

const ZBashInput = z.object({
  command: z.string().min(1).describe("The shell command to execute"),
  description: z
    .string()
    .optional()
    .describe("A short (5-10 word) description of what the command does, for the user"),
  timeout: z
    .number()
    .int()
    .min(0)
    .max(BASH_MAX_TIMEOUT_MS)
    .optional()
    .describe(
      `Optional timeout in milliseconds (max ${BASH_MAX_TIMEOUT_MS}, default ${BASH_DEFAULT_TIMEOUT_MS})`,
    ),
});

/**
 * Bash: `/bin/sh -c <command>` in the workspace root (reference `_bash.py`). On the local backend this runs
 * on the host unconfined; on sandboxed backends it runs inside the sandbox.
 */
export function createBashTool(context: ToolContext): BuiltinTool {
  return defineTool({
    name: "Bash",
    description:
      "Executes a shell command (/bin/sh -c) in the workspace root and returns its output. " +
      `Default timeout ${BASH_DEFAULT_TIMEOUT_MS} ms, maximum ${BASH_MAX_TIMEOUT_MS} ms. ` +
      "Output beyond 30000 characters is truncated.",
    input: ZBashInput,
    async run(input, options) {
      // 0 would mean "expire immediately" in the reference (asyncio.wait_for(0)); treat it as "default".
      const timeoutMs = Math.min(input.timeout || BASH_DEFAULT_TIMEOUT_MS, BASH_MAX_TIMEOUT_MS);
      const result = await context.machine.exec(["/bin/sh", "-c", input.command], {
        cwd: context.machine.workdir,
        ...(context.env ? { env: { ...context.env } } : {}),
        timeoutMs,
        signal: options.signal,
      });
      const stdout = normalizeNewlines(result.stdout.toString("utf8"));
      const stderr = normalizeNewlines(result.stderr.toString("utf8"));
      const metadata = { exitCode: result.exitCode, timedOut: result.timedOut, killed: result.killed };
      if (result.timedOut) {
        return {
          content: `Command timed out after ${timeoutMs}ms: ${input.command}`,
          isError: true,
          metadata,
        };
      }
      if (result.killed) {
        return { content: `Command was aborted: ${input.command}`, isError: true, metadata };
      }
      if (result.exitCode !== 0) {
        let text = `Command failed: ${input.command}\n`;
        if (stdout) text += `\nStdout:\n${stdout}`;
        if (stderr) text += `\nStderr:\n${stderr}`;
        return { content: truncateOutput(text), isError: true, metadata };
      }
      const text = stderr ? `${stdout}\n${stderr}` : stdout;
      return { content: truncateOutput(text), isError: false, metadata };
    },
  });
}
