import type { Metadata } from "next";
import { NotBuiltYet } from "@/app/_ui/not-built-yet";

export const metadata: Metadata = { title: "Agents" };

export default function AgentsPage() {
  return (
    <NotBuiltYet
      title="Agents"
      description="Agent definitions: model, tools, skills, MCP servers and isolation policy."
    />
  );
}
