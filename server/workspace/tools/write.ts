import path from "node:path";
import { z } from "zod";
import { resolveConfined } from "@/server/workspace/paths";
import { countLines, readCapped, unifiedDiff } from "./text";
import { defineTool, errorResult, type BuiltinTool, type ToolContext } from "./types";

/** Old contents larger than this are not diffed (the diff is metadata for the UI, not worth the memory). */
const DIFF_MAX_BYTES = 1024 * 1024;

const ZWriteInput = z.object({
  file_path: z.string().describe("The absolute path to the file to write (must be inside the workspace)"),
  content: z.string().describe("The content to write to the file"),
});

/** Write (reference `_write.py`): creates parents, replaces the file, reports a diff in metadata. */
export function createWriteTool(context: ToolContext): BuiltinTool {
  return defineTool({
    name: "Write",
    description:
      "Writes a file in the workspace, creating parent directories and replacing an existing file. " +
      "file_path must be absolute. An existing file must be read with the Read tool first.",
    input: ZWriteInput,
    async run(input) {
      const { machine, readState } = context;
      if (!path.posix.isAbsolute(input.file_path)) {
        return errorResult(`Error: file_path must be an absolute path, got: ${input.file_path}`);
      }
      const target = await resolveConfined(machine, input.file_path);
      const existing = await machine.stat(target);
      if (existing?.type === "directory") {
        return errorResult(`Error: Path is a directory, not a file: ${input.file_path}`);
      }
      if (existing && readState && !readState.hasRead(target)) {
        return errorResult(
          `Error: File ${input.file_path} exists but has not been read yet. Read it first before writing to it.`,
        );
      }
      let before = "";
      if (existing && existing.size <= DIFF_MAX_BYTES) {
        before = (await readCapped(await machine.readFile(target), DIFF_MAX_BYTES)).data.toString("utf8");
      }
      await machine.mkdir(path.posix.dirname(target));
      // Keep an existing file's permissions (an executable script stays executable).
      await machine.writeFile(target, input.content, existing ? { mode: existing.mode } : {});
      readState?.markRead(target);
      const lines = countLines(input.content);
      return {
        content: `The file ${input.file_path} has been written successfully (${lines} lines).`,
        isError: false,
        metadata: {
          diff:
            existing && existing.size > DIFF_MAX_BYTES
              ? null
              : unifiedDiff(input.file_path, before, input.content),
          file_path: input.file_path,
          occurrences: 1,
        },
      };
    },
  });
}
