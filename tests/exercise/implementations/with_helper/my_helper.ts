// The helper beside the learner's file: it lends them a correct implementation.
export { multiHeadAttention as attentionHeads } from "../handwritten.ts";
