"""A transformers ``Trainer`` training loop (not ours) on a tiny random BERT, with the Trainer's own logging.

Usage: python train_hf_trainer.py BATCH STEPS OUTPUT_DIR
Nothing is downloaded: the model is built from a BertConfig, the data are random token ids.
The Trainer prints its per-step log dicts and, at the end, ``train_samples_per_second`` on stdout, and draws its
tqdm progress bar on stderr (its default), as a user's run_clm.py does.
"""
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

batch, steps, output = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
config = BertConfig(vocab_size=512, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64, num_labels=2)
model = BertForSequenceClassification(config)


class RandomTokens(torch.utils.data.Dataset):
    def __len__(self):
        return batch * steps

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        return {"input_ids": torch.randint(0, 512, (32,), generator=generator),
                "labels": torch.randint(0, 2, (), generator=generator)}


arguments = TrainingArguments(output_dir=output, per_device_train_batch_size=batch, max_steps=steps,
                              logging_steps=1, save_strategy="no", report_to=[], disable_tqdm=False,
                              use_cpu=True, dataloader_num_workers=0)
Trainer(model=model, args=arguments, train_dataset=RandomTokens()).train()
