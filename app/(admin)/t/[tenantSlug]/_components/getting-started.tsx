import { ArrowRight, CheckCircle2, Circle } from "lucide-react";
import Link from "next/link";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";

type StepId = "agent" | "model" | "session" | "message" | "teammate";

/** What each step asks for and where it is done (the agent's page holds its key and "Test connection"). */
const STEPS: Record<StepId, { title: string; text: string; href: string }> = {
  agent: {
    title: "Create an agent",
    text: "A model endpoint, a system prompt, tools and defaults.",
    href: "agents",
  },
  model: {
    title: "Connect its model",
    text: "Store the model's API key on the agent and use Test connection.",
    href: "agents",
  },
  session: {
    title: "Start a session",
    text: "Chat with an agent; its workspace is provisioned on demand.",
    href: "sessions",
  },
  message: {
    title: "Send a message",
    text: "Open the session and ask the agent something.",
    href: "sessions",
  },
  teammate: {
    title: "Invite a teammate",
    text: "Send an invitation link with the role they get.",
    href: "members",
  },
};

/**
 * The getting-started checklist of a tenant that has not done everything yet, each step checked from its
 * data (operations.gettingStarted); hidden once every step is done.
 */
export function GettingStarted({
  tenantSlug,
  steps,
}: {
  tenantSlug: string;
  steps: Array<{ id: StepId; done: boolean }>;
}) {
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const done = steps.filter((step) => step.done).length;
  return (
    <Card aria-label="Getting started" className="mt-8">
      <CardHeader>
        <div>
          <CardTitle>Getting started</CardTitle>
          <CardDescription>
            {done} of {steps.length} done.
          </CardDescription>
        </div>
      </CardHeader>
      <CardContent>
        <ol className="grid gap-2 md:grid-cols-2">
          {steps.map((step) => {
            const copy = STEPS[step.id];
            return (
              <li key={step.id} data-step={step.id} data-done={step.done}>
                <Link
                  href={`${base}/${copy.href}`}
                  className="hover:bg-accent/40 group flex items-start gap-3 rounded-lg border p-3 transition-colors"
                >
                  {step.done ? (
                    <CheckCircle2 aria-label="done" className="mt-0.5 size-4 shrink-0 text-emerald-600" />
                  ) : (
                    <Circle aria-label="to do" className="text-muted-foreground mt-0.5 size-4 shrink-0" />
                  )}
                  <span className="flex-1">
                    <span
                      className={`block text-sm font-medium ${step.done ? "line-through opacity-70" : ""}`}
                    >
                      {copy.title}
                    </span>
                    <span className="text-muted-foreground mt-1 block text-xs">{copy.text}</span>
                  </span>
                  <ArrowRight className="text-muted-foreground mt-0.5 size-4 transition-transform group-hover:translate-x-0.5" />
                </Link>
              </li>
            );
          })}
        </ol>
      </CardContent>
    </Card>
  );
}
