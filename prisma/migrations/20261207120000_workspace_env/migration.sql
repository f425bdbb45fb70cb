-- Environment variables of agents' and sessions' commands (issue 25; server/workspace/workspace-env.ts).
ALTER TABLE "agents" ADD COLUMN "env" JSONB NOT NULL DEFAULT '{}';
ALTER TABLE "sessions" ADD COLUMN "env" JSONB NOT NULL DEFAULT '{}';
