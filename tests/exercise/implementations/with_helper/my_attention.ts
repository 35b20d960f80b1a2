// A learner's file that imports a helper module from its own folder.
import { attentionHeads } from "./my_helper.ts";

export function multiHeadAttention(tokens: number[][], heads: number, options: { causal?: boolean; outputProjection?: number[][] } = {}) {
  return attentionHeads(tokens, heads, options);
}
