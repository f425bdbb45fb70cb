import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { createBashTool } from "./bash";
import { createEditTool } from "./edit";
import { createGlobTool } from "./glob";
import { createGrepTool } from "./grep";
import { createReadTool, type ReadToolOptions } from "./read";
import { FileReadState, type BuiltinTool, type GrepProgram, type ToolContext } from "./types";
import { createWriteTool } from "./write";

export type { BuiltinTool } from "./types";
export { FileReadState } from "./types";

export type BuiltinToolsOptions = ReadToolOptions & {
  /**
   * Read-before-write bookkeeping shared by Read, Write and Edit. Pass one per conversation to keep it across
   * turns; omitted, a fresh one is made for this tool list; `null` turns the rule off (scripts, tests).
   */
  readState?: FileReadState | null;
  /**
   * Environment variables of Bash's commands (a session's: its agent's and its own, workspace-env.ts), set
   * over the machine's own environment on every backend.
   */
  env?: Readonly<Record<string, string>>;
  /** What Grep runs (tests of each); absent: ripgrep where the machine has it, else GNU grep. */
  grepProgram?: GrepProgram;
};

/**
 * The six builtin tools, in the reference's order (Bash, Edit, Glob, Grep, Read, Write), bound to one
 * backend. They use only the WorkspaceMachine port, so they behave the same on every backend.
 */
export function createBuiltinTools(
  source: WorkspaceMachine | { readonly machine: WorkspaceMachine },
  options: BuiltinToolsOptions = {},
): BuiltinTool[] {
  const machine = "exec" in source ? source : source.machine;
  const context: ToolContext = {
    machine,
    readState: options.readState === undefined ? new FileReadState() : options.readState,
    ...(options.env ? { env: options.env } : {}),
    ...(options.grepProgram ? { grepProgram: options.grepProgram } : {}),
  };
  return [
    createBashTool(context),
    createEditTool(context),
    createGlobTool(context),
    createGrepTool(context),
    createReadTool(context, options),
    createWriteTool(context),
  ];
}
