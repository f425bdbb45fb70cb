import { z } from "zod";
import { isAppError } from "@/server/shared/errors";
import type { WorkspaceBackend } from "@/server/workspace/backend/port";

/** An attachment a tool hands back next to its text (Read of an image or PDF the model accepts). */
export type ToolDataBlock = { type: "data"; mediaType: string; base64: string; name?: string };

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
  backend: WorkspaceBackend;
  readState: FileReadState | null;
};

export function errorResult(content: string, metadata?: Record<string, unknown>): ToolResult {
  return metadata ? { content, isError: true, metadata } : { content, isError: true };
}

/** The text an agent should see for a thrown error: AppError's user message, else the plain message. */
export function errorText(error: unknown): string {
  if (isAppError(error))
    return error.userMessage.startsWith("Error") ? error.userMessage : `Error: ${error.userMessage}`;
  return `Error: ${error instanceof Error ? error.message : String(error)}`;
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
