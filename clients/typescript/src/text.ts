/**
 * Telling the answer from the reasoning. A reasoning item is an assistant message too (`kind:
 * "message"`, `role: "assistant"`): its content parts tell them apart. The answer is the `text`
 * parts of the assistant's message items; the reasoning their `reasoning` parts. A delta belongs to
 * the reasoning when its item started with a `reasoning` part.
 */

import type { UniversalEvent, UniversalItem } from "./models.js";

export type Piece = ["answer" | "reasoning", string];

function assistantMessage(item: UniversalItem | undefined): item is UniversalItem {
  return !!item && item.kind === "message" && item.role === "assistant";
}

/** Whether `item` is an assistant's reasoning. */
export function isReasoningItem(item: UniversalItem): boolean {
  return assistantMessage(item) && item.content.some((part) => part.type === "reasoning");
}

/** The answer text of an assistant message item ('' for any other item). */
export function answerOf(item: UniversalItem): string {
  if (!assistantMessage(item)) return "";
  return item.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

/** The reasoning text of an assistant message item. */
export function reasoningOf(item: UniversalItem): string {
  if (!assistantMessage(item)) return "";
  return item.content.map((part) => (part.type === "reasoning" ? part.text : "")).join("");
}

/** Follows a turn's events and keeps its answer and its reasoning apart. */
export class AnswerText {
  private kinds = new Map<string, "answer" | "reasoning">();
  private streamed = new Map<string, string[]>();
  private completed = new Map<string, [string, string]>();
  private order: string[] = [];

  /** Takes the next event; a piece of the answer or of the reasoning, if it is one. */
  feed(event: UniversalEvent): Piece | undefined {
    if (event.type === "item.started" || event.type === "item.completed") {
      const item = (event.data as { item?: UniversalItem }).item;
      if (!assistantMessage(item)) return undefined;
      if (!this.kinds.has(item.item_id)) this.order.push(item.item_id);
      this.kinds.set(item.item_id, isReasoningItem(item) ? "reasoning" : "answer");
      if (event.type === "item.completed") this.completed.set(item.item_id, [answerOf(item), reasoningOf(item)]);
      return undefined;
    }
    if (event.type === "item.delta") {
      const data = event.data as { item_id: string; delta: string };
      const kind = this.kinds.get(data.item_id);
      if (!kind) return undefined;
      const pieces = this.streamed.get(data.item_id) ?? [];
      pieces.push(data.delta);
      this.streamed.set(data.item_id, pieces);
      return [kind, data.delta];
    }
    return undefined;
  }

  private text(kind: "answer" | "reasoning"): string {
    return this.order
      .map((id) => {
        const done = this.completed.get(id);
        if (done) return kind === "answer" ? done[0] : done[1];
        return this.kinds.get(id) === kind ? (this.streamed.get(id) ?? []).join("") : "";
      })
      .join("");
  }

  /** The answer so far: every assistant message's text, reasoning excluded. */
  get answer(): string { return this.text("answer"); }
  /** The last assistant message's text (a turn's final answer, as `TurnOutcome.finalText`). */
  get final(): string {
    for (const id of [...this.order].reverse()) {
      if (this.kinds.get(id) !== "answer") continue;
      const done = this.completed.get(id);
      return done ? done[0] : (this.streamed.get(id) ?? []).join("");
    }
    return "";
  }
  /** The reasoning so far. */
  get reasoning(): string { return this.text("reasoning"); }
}
