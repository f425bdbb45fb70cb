import { AppError } from "@/server/shared/errors";

/**
 * The workspace guidance appended to an agent's system prompt (the reference's
 * DEFAULT_WORKSPACE_INSTRUCTIONS, agentscope-spec.md §1.5), with the code fence after `uv venv` closed —
 * the reference leaves it open, so everything after it rendered as code. Placeholders: {backend}, {workdir}.
 */
export const DEFAULT_WORKSPACE_INSTRUCTIONS = `<workspace>You have access to a {backend} workspace at {workdir} with the following structure:

\`\`\`
{workdir}
├── data/        # offloaded multimodal files (images, etc.) — system-managed
├── skills/      # reusable skills, grouped by the agent that owns them
└── sessions/    # offloaded session context and tool results — system-managed
\`\`\`

This workspace is your personal working environment. You are responsible for keeping it clean, structured, and easy to navigate over time.

### Project Directory
- Create a dedicated subdirectory for each task or project under the workspace root.
- Name each project subdirectory concisely and descriptively, prefixed with its absolute creation date, e.g. \`20240315_web-scraper\`, so it stays identifiable long after creation.
- Always create a \`README.md\` at the project root documenting:
  - What the project is about
  - Its absolute creation date
  - Key decisions or context that would help you resume work later

### Working Across Sessions
- The same project may be worked on from more than one session at a time. No lock tells you that another session is editing a file, so avoid conflicts by isolation:
  - Prefer \`git worktree\` with a session-specific name, so parallel work happens on separate trees.
  - Encode ownership in names (creation date, session identifier) so it is clear which session created what.
- Be conservative about deletion: do not delete anything you did not create in the current session, prefer archiving over deleting, and rely on git so any change can be rolled back. Confirm before destructive cleanup.

### Scratch / Temporary Files
- Put one-off experiments, intermediate data, and anything you would otherwise drop in \`/tmp\` under a \`scratch/\` directory (created on first use), not inside project directories.
- Treat \`scratch/\` as disposable: exclude it from git and assume nothing in it persists. Nothing clears it automatically, so delete your own scratch files when you are done with them.

### Version Control
- Prefer initializing a \`git\` repository in each project directory to track changes and allow rollbacks.
- If you use git, create a \`.gitignore\` before the first commit to exclude unwanted files (virtual environments, caches, \`scratch/\`, secrets).
- Never hard-code secrets into project files or commit them.

### Python Environment
- \`uv\` is recommended for managing and isolating Python environments per project:
\`\`\`shell
uv venv && uv pip install ...
\`\`\`
- Never install packages into a shared or global environment: each project manages its own dependencies.</workspace>`;

/**
 * Fills `{backend}` (the driver's `instructionsLabel`: "Docker-based") and `{workdir}` in one pass (the reference's E2B backend formatted twice, which broke
 * templates with escaped braces). `{{` and `}}` are literal braces; any other placeholder is an error, checked
 * when the template is accepted rather than at prompt time.
 */
export function renderInstructions(template: string, backend: string, workdir: string): string {
  const values: Record<string, string> = { backend, workdir };
  return template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (match, name: string | undefined) => {
    if (match === "{{") return "{";
    if (match === "}}") return "}";
    const value = name === undefined ? undefined : values[name];
    if (value === undefined) {
      throw new AppError("BAD_REQUEST", `Unknown placeholder ${match} in workspace instructions`, {
        userMessage: "Workspace instructions may only use the {backend} and {workdir} placeholders",
      });
    }
    return value;
  });
}

/** Throws BAD_REQUEST when a custom template uses placeholders other than {backend} and {workdir}. */
export function validateInstructionsTemplate(template: string): void {
  renderInstructions(template, "local", "/workspace");
}
