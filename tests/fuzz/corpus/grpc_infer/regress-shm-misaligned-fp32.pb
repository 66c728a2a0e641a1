*l
inputFP32"
shared_memory_byte_size@"
shared_memory_offsetÅ"
shared_memory_regionr2D
logits
shared_memory_byte_size
shared_memory_regionr