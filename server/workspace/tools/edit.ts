import path from "node:path";
import { z } from "zod";
import { resolveConfined } from "@/server/workspace/paths";
import { readCapped, unifiedDiff } from "./text";
import { defineTool, errorResult, type BuiltinTool, type ToolContext } from "./types";

/** Edit holds the whole file in memory to replace text, so it refuses larger files. */
const EDIT_MAX_FILE_BYTES = 16 * 1024 * 1024;

const ZEditInput = z.object({
  file_path: z.string().describe("The absolute path to the file to modify"),
  old_string: z.string().describe("The exact text to replace"),
  new_string: z.string().describe("The text to replace it with (must differ from old_string)"),
  replace_all: z.boolean().default(false).describe("Replace every occurrence of old_string (default false)"),
});

/** Edit (reference `_edit.py`): exact string replacement; a non-unique match needs `replace_all`. */
export function createEditTool(context: ToolContext): BuiltinTool {
  return defineTool({
    name: "Edit",
    description:
      "Performs an exact string replacement in a file. The file must have been read with the Read tool. " +
      "Fails when old_string is not found, or when it occurs more than once and replace_all is false.",
    input: ZEditInput,
    async run(input) {
      const { machine, readState } = context;
      if (!path.posix.isAbsolute(input.file_path)) {
        return errorResult(`Error: file_path must be an absolute path, got: ${input.file_path}`);
      }
      if (input.old_string === input.new_string) {
        return errorResult("Error: No changes to make: old_string and new_string are exactly the same.");
      }
      if (input.old_string.length === 0) {
        return errorResult("Error: old_string must not be empty. Use the Write tool to create a file.");
      }
      const target = await resolveConfined(machine, input.file_path);
      const info = await machine.stat(target);
      if (!info) return errorResult(`Error: File does not exist: ${input.file_path}`);
      if (info.type === "directory")
        return errorResult(`Error: Path is a directory, not a file: ${input.file_path}`);
      if (readState && !readState.hasRead(target)) {
        return errorResult("Error: To edit a file, you must first read it using the Read tool.");
      }
      if (info.size > EDIT_MAX_FILE_BYTES) {
        return errorResult(
          `Error: ${input.file_path} is ${info.size} bytes; Edit handles files up to ${EDIT_MAX_FILE_BYTES} bytes.`,
        );
      }
      const before = (await readCapped(await machine.readFile(target), EDIT_MAX_FILE_BYTES)).data.toString(
        "utf8",
      );
      const occurrences = countOccurrences(before, input.old_string);
      if (occurrences === 0) {
        return errorResult(`Error: String to replace not found in file.\nString: ${input.old_string}`);
      }
      if (occurrences > 1 && !input.replace_all) {
        return errorResult(
          `Error: old_string appears ${occurrences} times in the file. To replace all occurrences, set ` +
            "replace_all to true. To replace only one, provide more surrounding context to make it unique.",
        );
      }
      // split/join rather than String.replace: `$&` and friends in new_string must stay literal.
      const after = input.replace_all
        ? before.split(input.old_string).join(input.new_string)
        : replaceFirst(before, input.old_string, input.new_string);
      await machine.writeFile(target, after, { mode: info.mode });
      return {
        content: input.replace_all
          ? `Successfully replaced all ${occurrences} occurrences in ${input.file_path}`
          : `Successfully replaced 1 occurrence in ${input.file_path}`,
        isError: false,
        metadata: {
          diff: unifiedDiff(input.file_path, before, after),
          file_path: input.file_path,
          occurrences: input.replace_all ? occurrences : 1,
        },
      };
    },
  });
}

function countOccurrences(haystack: string, needle: string): number {
  let count = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length))
    count++;
  return count;
}

function replaceFirst(haystack: string, needle: string, replacement: string): string {
  const at = haystack.indexOf(needle);
  return haystack.slice(0, at) + replacement + haystack.slice(at + needle.length);
}
