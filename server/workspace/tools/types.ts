import { z } from "zod";
import { redactHostPaths } from "@/server/shared/host-paths";
import { isAppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";

/** An attachment a tool hands back next to its text (Read of an image or PDF the model accepts). */
type ToolDataBlock = { type: "data"; mediaType: string; base64: string; name?: string };

/** What every builtin tool returns. Errors are results (`isError: true`), never exceptions. */
export type ToolResult = {
  content: string;
  isError: boolean;
  /** Tool-specific facts for the UI (diff, exitCode, ...). Not shown to the model. */
  metadata?: Record<string, unknown>;
  attachments?: ToolDataBlock[];
};

export type ToolCallOptions = { signal?: AbortSignal };

/** A tool ready for LLM tool calling: `inputSchema` is JSON Schema generated from the zod input. */
export type BuiltinTool = {
  readonly name: "Bash" | "Read" | "Write" | "Edit" | "Glob" | "Grep";
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
  /** Validates `input` with the tool's zod schema; invalid input is an error result. */
  execute(input: unknown, options?: ToolCallOptions): Promise<ToolResult>;
};

/**
 * Which files the agent has Read in this conversation. Write (of an existing file) and Edit refuse files
 * that were not read first, as the reference does, so the model never overwrites what it has not seen.
 */
export class FileReadState {
  private readonly readPaths = new Set<string>();
  markRead(path: string): void {
    this.readPaths.add(path);
  }
  hasRead(path: string): boolean {
    return this.readPaths.has(path);
  }
}

/** What a tool needs: the backend and the shared read state (null disables the read-before-write rule). */
export type ToolContext = {
  machine: WorkspaceMachine;
  readState: FileReadState | null;
  /** Environment variables of Bash's commands, over the machine's own (see BuiltinToolsOptions.env). */
  env?: Readonly<Record<string, string>>;
  /** What Grep runs; absent: ripgrep where the machine has it, else GNU grep (see grep.ts). */
  grepProgram?: GrepProgram;
};

export type GrepProgram = "ripgrep" | "grep";

export function errorResult(content: string, metadata?: Record<string, unknown>): ToolResult {
  return metadata ? { content, isError: true, metadata } : { content, isError: true };
}

/**
 * The text an agent (and the user watching the chat) sees for a thrown error: AppError's user message, a
 * filesystem error by its kind (its message quotes the host path), else the plain message. Registered host
 * directories are redacted whatever the source.
 */
export function errorText(error: unknown): string {
  if (isAppError(error))
    return redactHostPaths(
      error.userMessage.startsWith("Error") ? error.userMessage : `Error: ${error.userMessage}`,
    );
  const systemCode = systemErrorCode(error);
  if (systemCode)
    return `Error: ${SYSTEM_ERROR_TEXT[systemCode] ?? "the file operation failed"} (${systemCode})`;
  return redactHostPaths(`Error: ${error instanceof Error ? error.message : String(error)}`);
}

const SYSTEM_ERROR_TEXT: Record<string, string> = {
  ENOENT: "no such file or directory",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EISDIR: "is a directory",
  ENOTDIR: "not a directory",
  ENAMETOOLONG: "the path or a name in it is too long",
  EEXIST: "already exists",
  ENOSPC: "no space left on the device",
  ELOOP: "too many levels of symbolic links",
};

function systemErrorCode(error: unknown): string | null {
  if (!(error instanceof Error) || !("code" in error) || !("syscall" in error)) return null;
  return typeof error.code === "string" && /^E[A-Z]+$/.test(error.code) ? error.code : null;
}

/** Builds a tool from a zod schema: JSON-schema export, input validation, and thrown errors as results. */
export function defineTool<Schema extends z.ZodObject>(definition: {
  name: BuiltinTool["name"];
  description: string;
  input: Schema;
  run: (input: z.infer<Schema>, options: ToolCallOptions) => Promise<ToolResult>;
}): BuiltinTool {
  const inputSchema = z.toJSONSchema(definition.input, { io: "input" }) as Record<string, unknown>;
  delete inputSchema.$schema;
  return {
    name: definition.name,
    description: definition.description,
    inputSchema,
    async execute(input, options = {}) {
      const parsed = definition.input.safeParse(input);
      if (!parsed.success) {
        return errorResult(`Error: invalid input for ${definition.name}: ${z.prettifyError(parsed.error)}`);
      }
      try {
        return await definition.run(parsed.data, options);
      } catch (error) {
        return errorResult(errorText(error));
      }
    },
  };
}
