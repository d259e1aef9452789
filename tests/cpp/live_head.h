// Model-level gradient comparisons need an LM head that passes a gradient down.
// With a zero head (model.head_init "zero") the logits
// are 0 at step 0, the loss is ln V on any path and every gradient below the head is
// exactly 0: comparing those passes whatever the kernels compute. Tests that
// compare gradients give the head random weights first and check that what they
// compare is not zero.
#pragma once

#include "model/gpt.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

namespace xsagpt::test {

// lm_head.weight ~ N(0, std) from the global generator (a tied head is the
// embedding, already random: left alone). Logits of a few units at these widths.
inline void randomize_head(GPT& m, double std = 0.5) {
  if (m->cfg.tie_embeddings) return;
  torch::NoGradGuard no_grad;
  m->lm_head->weight.normal_(0.0, std);
}

// Every parameter's gradient by name (undefined where none arrived).
inline std::map<std::string, torch::Tensor> gradients(const GPT& m) {
  std::map<std::string, torch::Tensor> g;
  for (const auto& [n, p] : m->unique_named_parameters())
    g[n] = p.grad().defined() ? p.grad().clone() : torch::Tensor();
  return g;
}

// Asserts that every gradient is defined and not all zero, those below the head
// included: a comparison of these can fail.
inline void assert_live(const std::map<std::string, torch::Tensor>& grads) {
  ASSERT_FALSE(grads.empty());
  for (const auto& [name, g] : grads) {
    ASSERT_TRUE(g.defined()) << name << " got no gradient";
    ASSERT_GT(g.abs().max().item<double>(), 0.0) << name << "'s gradient is all zero: nothing to compare";
  }
}

}  // namespace xsagpt::test
