import { Alert } from "@/app/_components/ui/alert";

/** The outcome of the last change made in a panel: an error (announced as an alert) or a success. */
export type NoticeMessage = { kind: "error" | "success"; text: string };

export function Notice({ message, testId }: { message: NoticeMessage | null; testId: string }) {
  if (!message) return null;
  return (
    <Alert tone={message.kind} className="mt-3" data-testid={testId}>
      {message.text}
    </Alert>
  );
}
