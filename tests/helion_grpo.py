"""Helion's GRPO loss kernels (examples/grpo_loss.py), as Helion writes them but for the names:
`td.` for `torch.`/`hl.`, no `device=`, and one rewrite in the backward pass, where Helion
stores a tile over L into `grad_logits` of L + 1 rows and tiledsl asks for a view of the
first L (`grad_fwd`; a tile indexes a dimension of its own size, which catches swapped tiles).
The slice `logits[:, :-1, :]` and the host store `grad_logits[:, -1, :] = 0` are as written."""

import tiledsl as td


@td.tile_kernel
def grpo_loss_forward(logits, selected_logits, old_logp, ref_logp, advantages,
                      completion_mask, temperature, beta, eps_low, eps_high):
    B, L_ADD_1, V = logits.shape
    L = L_ADD_1 - 1

    logits = logits[:, :-1, :]  # [B, L, V]

    loss = td.zeros([B, L], dtype=td.float32)
    is_clipped = td.zeros([B, L], dtype=td.float32)
    kl_loss = td.zeros([B, L], dtype=td.float32)
    lse = td.zeros([B, L], dtype=td.float32)

    for tile_b, tile_l in td.tile([B, L]):
        max_logits = td.full([tile_b, tile_l], float("-inf"), dtype=td.float32)
        sum_exp = td.zeros([tile_b, tile_l], dtype=td.float32)

        for tile_v in td.tile(V):
            logits_tile = logits[tile_b, tile_l, tile_v].to(td.float32) / temperature
            new_m_i = td.maximum(max_logits, td.amax(logits_tile, dim=-1))
            alpha = td.exp(max_logits - new_m_i)
            sum_exp = sum_exp * alpha + td.sum(
                td.exp(logits_tile - new_m_i[:, :, None]), dim=-1
            )
            max_logits = new_m_i

        log_sum_exp = max_logits + td.log(sum_exp)  # [tile_b, tile_l]
        lse[tile_b, tile_l] = log_sum_exp

        logp = selected_logits[tile_b, tile_l] - log_sum_exp

        if old_logp is None:
            old_logp_val = logp
        else:
            old_logp_val = old_logp[tile_b, tile_l]

        coef_1 = td.exp(logp - old_logp_val)
        coef_2 = td.clamp(coef_1, 1 - eps_low, 1 + eps_high)

        advantage = advantages[tile_b]

        per_token_loss1 = coef_1 * advantage[:, None]
        per_token_loss2 = coef_2 * advantage[:, None]
        per_token_loss = -td.minimum(per_token_loss1, per_token_loss2)

        if completion_mask is not None:
            per_token_loss *= completion_mask[tile_b, tile_l]

        if beta != 0.0 and ref_logp is not None:
            ref_logp_val = ref_logp[tile_b, tile_l]
            kl = td.exp(ref_logp_val - logp) - (ref_logp_val - logp) - 1
            if completion_mask is not None:
                kl *= completion_mask[tile_b, tile_l]
            per_token_loss += beta * kl
            kl_loss[tile_b, tile_l] = kl

        loss[tile_b, tile_l] = per_token_loss
        is_clipped[tile_b, tile_l] = (per_token_loss1 < per_token_loss2).float()

    return loss, kl_loss, is_clipped, lse


@td.tile_kernel
def grpo_loss_backward(grad_output, logits, selected_logits, completion_ids, old_logp,
                       ref_logp, advantages, completion_mask, lse, temperature, beta,
                       eps_low, eps_high):
    B, L_ADD_1, V = logits.shape
    L = L_ADD_1 - 1

    logits_fwd = logits[:, :-1, :]  # [B, L, V]

    grad_logits = td.zeros_like(logits)
    grad_fwd = grad_logits[:, :-1, :]  # tiledsl's rewrite: the L rows the tiles cover

    for tile_b, tile_l in td.tile([B, L]):
        completion_id = completion_ids[tile_b, tile_l]

        log_sum_exp = lse[tile_b, tile_l]

        logp = selected_logits[tile_b, tile_l] - log_sum_exp

        if old_logp is None:
            old_logp_val = logp
        else:
            old_logp_val = old_logp[tile_b, tile_l]

        coef_1 = td.exp(logp - old_logp_val)
        coef_2 = td.clamp(coef_1, 1 - eps_low, 1 + eps_high)

        advantage = advantages[tile_b]

        per_token_loss1 = coef_1 * advantage[:, None]
        per_token_loss2 = coef_2 * advantage[:, None]

        mask = (per_token_loss2 >= per_token_loss1).float()

        dlogp = -per_token_loss1 * mask

        if beta != 0.0 and ref_logp is not None:
            ref_logp_val = ref_logp[tile_b, tile_l]
            dlogp += beta * (1 - td.exp(ref_logp_val - logp))

        dlogp = dlogp * grad_output[tile_b, tile_l] / temperature

        if completion_mask is not None:
            mask_val = completion_mask[tile_b, tile_l]
            dlogp *= mask_val

        for tile_v in td.tile(V):
            logits_tile = (
                logits_fwd[tile_b, tile_l, tile_v].to(td.float32) / temperature
            )
            probs = td.exp(logits_tile - log_sum_exp[:, :, None])

            v_indices = tile_v.index
            sel = v_indices[None, None, :] == completion_id[:, :, None]

            grad_logits_tile = td.where(
                sel,
                dlogp[:, :, None] * (1 - probs),
                -dlogp[:, :, None] * probs,
            )
            grad_fwd[tile_b, tile_l, tile_v] = grad_logits_tile

    grad_logits[:, -1, :] = 0

    return grad_logits
